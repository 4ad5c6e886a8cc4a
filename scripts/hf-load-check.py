#!/usr/bin/env python3
"""Loads a folder written by `agentrl-tui export` in HuggingFace transformers itself and compares
its next-token log-probs with this project's `score` on the same folder.

    agentrl-tui score --model DIR --ids 1,2,3 --backend go > ours.json
    hf-load-check.py --model DIR --ids 1,2,3 --ours ours.json [--dtype float32] [--device cpu] [--tol 1e-4]

Prints one JSON line: {"model", "shards", "transformers", "torch", "device", "dtype", "n",
"max_err", "tol", "ok", "load_s"}; exit code 0 when max_err <= tol, 1 when not, 2 when the folder does
not load (the error is printed as "error"). scripts/gpu-check.sh runs it where transformers is
installed (the lent GPU machines); CI has no transformers.
"""
import argparse
import glob
import json
import os
import sys
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--ids", required=True, help="comma-separated token ids, as given to score")
    ap.add_argument("--ours", required=True, help="score's JSON output for the same ids")
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--tol", type=float, default=1e-4)
    a = ap.parse_args()

    out = {"model": a.model, "shards": len(glob.glob(os.path.join(a.model, "model-*-of-*.safetensors"))),
           "device": a.device, "dtype": a.dtype, "tol": a.tol}
    try:
        import torch
        import transformers
        out["torch"], out["transformers"] = torch.__version__, transformers.__version__
        t0 = time.time()
        dt = getattr(torch, a.dtype)
        # from_pretrained reads model.safetensors.index.json and every shard; no network.
        m = transformers.AutoModelForCausalLM.from_pretrained(a.model, torch_dtype=dt, local_files_only=True)
        m = m.to(a.device).eval()
        out["load_s"] = round(time.time() - t0, 2)
        out["class"] = type(m).__name__
    except Exception as e:  # the point of the check: say why it does not load
        out["ok"], out["error"] = False, f"{type(e).__name__}: {e}"
        print(json.dumps(out))
        sys.exit(2)

    ids = [int(x) for x in a.ids.split(",")]
    with torch.no_grad():
        x = torch.tensor([ids], device=a.device)
        logits = m(x).logits[0].float()
        lp = torch.log_softmax(logits, dim=-1)
        theirs = [lp[t, ids[t + 1]].item() for t in range(len(ids) - 1)]
    with open(a.ours) as f:
        ours = json.loads(f.read().strip().splitlines()[-1])["next_token_logprobs"]
    if len(ours) != len(theirs):
        out["ok"], out["error"] = False, f"score gave {len(ours)} log-probs, transformers {len(theirs)}"
        print(json.dumps(out))
        sys.exit(1)
    err = max(abs(p - q) for p, q in zip(ours, theirs))
    out.update(n=len(theirs), max_err=err, ok=err <= a.tol)
    print(json.dumps(out))
    sys.exit(0 if out["ok"] else 1)


if __name__ == "__main__":
    main()
