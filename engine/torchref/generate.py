"""PyTorch/transformers reference for `agentrl-tui bench rollout` on a GPU.

Builds a randomly initialised Qwen3/Qwen2 model of the given shape (no download), generates
NEW tokens for SEQUENCES prompts of PROMPT_LEN random tokens in batches of SLOTS with
model.generate (sampling at temperature 1, no early stop), and prints one JSON line with the
generated tokens per second. Run by the Go benchmark with the same numbers it used.
"""
import json
import sys
import time

import torch
from transformers import AutoConfig, AutoModelForCausalLM


def main() -> None:
    spec = json.loads(sys.argv[1])
    cfg = AutoConfig.for_model(
        spec["model_type"],
        vocab_size=spec["vocab_size"],
        hidden_size=spec["hidden_size"],
        intermediate_size=spec["intermediate_size"],
        num_hidden_layers=spec["num_hidden_layers"],
        num_attention_heads=spec["num_attention_heads"],
        num_key_value_heads=spec["num_key_value_heads"],
        head_dim=spec["head_dim"],
        tie_word_embeddings=spec["tie_word_embeddings"],
        max_position_embeddings=max(4096, spec["prompt_len"] + spec["new_tokens"] + 1),
    )
    dtype = torch.bfloat16 if spec["dtype"] == "bfloat16" else torch.float32
    torch.manual_seed(1)
    model = AutoModelForCausalLM.from_config(cfg, torch_dtype=dtype).cuda().eval()
    g = torch.Generator(device="cuda").manual_seed(1)
    batches = [spec["slots"]] * (spec["sequences"] // spec["slots"])
    if spec["sequences"] % spec["slots"]:
        batches.append(spec["sequences"] % spec["slots"])

    def run(b: int) -> None:
        ids = torch.randint(0, spec["vocab_size"], (b, spec["prompt_len"]), device="cuda", generator=g)
        model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=spec["new_tokens"],
                       min_new_tokens=spec["new_tokens"], do_sample=True, temperature=1.0, top_p=1.0,
                       top_k=0, pad_token_id=0)

    with torch.no_grad():
        run(min(2, spec["slots"]))  # warm-up (kernels, allocator)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for b in batches:
            run(b)
        torch.cuda.synchronize()
        wall = time.perf_counter() - t0
    tokens = spec["sequences"] * spec["new_tokens"]
    print(json.dumps({"tokens": tokens, "wall_s": wall, "tokens_per_s": tokens / wall,
                      "torch": torch.__version__, "device": torch.cuda.get_device_name()}))


if __name__ == "__main__":
    main()
