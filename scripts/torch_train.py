# PyTorch eager reference for the training update of `bench train`, on any device: runs
# engine/torchref/cpu.py (the engine's model layout, the recipes' clipped-surrogate update with an
# AdamW step per micro-batch) with torch's default device set to --device, in bfloat16 autocast
# over float32 master weights when --dtype bfloat16 (as the engine computes on a GPU), and with
# every clock reading of cpu.py preceded by a device synchronisation so that the timings hold on a
# GPU. The model's shape comes from a HuggingFace config.json; weights are random.
# Prints one JSON line: engine/torchref.Result with "device" and "dtype" set.
#
#   python scripts/torch_train.py --config DIR/config.json --sequences 8 --length 1024 \
#       --prompt 256 --micro-batch 8 --device cuda --dtype bfloat16
import argparse, contextlib, io, json, os, sys, time

import torch

ap = argparse.ArgumentParser()
ap.add_argument("--config", required=True)
ap.add_argument("--sequences", type=int, default=8)
ap.add_argument("--length", type=int, default=1024)
ap.add_argument("--prompt", type=int, default=256)
ap.add_argument("--micro-batch", type=int, default=8)
ap.add_argument("--updates", type=int, default=2)
ap.add_argument("--device", default="cuda")
ap.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"])
ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
a = ap.parse_args()

cfg = json.load(open(a.config))
rope = cfg.get("rope_parameters") or cfg.get("rope_scaling") or {}
spec = {k: cfg[k] for k in ("model_type", "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                            "num_attention_heads", "num_key_value_heads")}
spec.update(head_dim=cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"],
            rms_norm_eps=cfg.get("rms_norm_eps", 1e-6), rope_theta=cfg.get("rope_theta") or rope.get("rope_theta", 10000.0),
            tie_word_embeddings=bool(cfg.get("tie_word_embeddings")), attention_bias=bool(cfg.get("attention_bias")),
            threads=a.threads, seed=1,
            train={"sequences": a.sequences, "length": a.length, "prompt": a.prompt, "micro_batch": a.micro_batch, "updates": a.updates})

here = os.path.dirname(os.path.abspath(__file__))
src = open(os.path.join(here, "..", "engine", "torchref", "cpu.py")).read()

dev = torch.device(a.device)
if dev.type != "cpu":
    torch.set_default_device(dev)  # torch >= 2.0: every tensor and module cpu.py creates lands there
    _clock = time.perf_counter

    def synced_clock():
        torch.cuda.synchronize()
        return _clock()

    time.perf_counter = synced_clock
autocast = torch.autocast(dev.type, dtype=torch.bfloat16) if a.dtype == "bfloat16" else contextlib.nullcontext()

sys.argv = ["cpu.py", json.dumps(spec)]
buf = io.StringIO()
with contextlib.redirect_stdout(buf), autocast:
    exec(compile(src, "cpu.py", "exec"), {"__name__": "__main__"})
out = json.loads(buf.getvalue().strip().splitlines()[-1])
out.update(device=str(dev) if dev.type == "cpu" else torch.cuda.get_device_name(dev), dtype=a.dtype, python=sys.executable)
print(json.dumps(out))
