#!/usr/bin/env python3
"""HF transformers itself, in float32 on DEVICE, against the golden log-probs of testdata/fixtures
(made by transformers on the CPU): how far the reference framework moves from its own CPU numbers
on a GPU, the yardstick for this project's float32 GPU parity. One JSON line per fixture."""
import json, os, sys
import torch, transformers

dev = sys.argv[1] if len(sys.argv) > 1 else "cuda"
root = "testdata/fixtures"
for name in sorted(os.listdir(root)):
    d = os.path.join(root, name)
    if not (os.path.exists(os.path.join(d, "golden.json")) and os.path.exists(os.path.join(d, "config.json"))
            and os.path.exists(os.path.join(d, "model.safetensors"))):
        continue
    g = json.load(open(os.path.join(d, "golden.json")))
    m = transformers.AutoModelForCausalLM.from_pretrained(d, torch_dtype=torch.float32, local_files_only=True).to(dev).eval()
    err = 0.0
    with torch.no_grad():
        for c in g["cases"]:
            ids = c["input_ids"]
            lp = torch.log_softmax(m(torch.tensor([ids], device=dev)).logits[0].float(), -1)
            for t, want in enumerate(c["next_token_logprobs"]):
                err = max(err, abs(lp[t, ids[t + 1]].item() - want))
    print(json.dumps({"fixture": name, "device": dev, "dtype": "float32", "max_err": err,
                      "tf32_matmul": torch.backends.cuda.matmul.allow_tf32, "torch": torch.__version__}), flush=True)
