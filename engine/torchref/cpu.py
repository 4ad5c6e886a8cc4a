# PyTorch eager reference for `agentrl-tui bench train`, `bench sft` and `bench rollout` on the CPU: a decoder of
# the Go engine's model layout (engine/model: Qwen3 q/k RMSNorm per head or Qwen2 q/k/v biases,
# RoPE, grouped-query attention, SwiGLU MLP, RMSNorm in float32, tied or separate output
# projection), random weights unless "weights" names safetensors, timed on the work the Go side
# does: decoding with a KV cache in rounds of `slots` sequences (sampling at temperature 1 and
# keeping the sampled token's log-prob), one supervised step (`sft`: cross-entropy, gradients
# accumulated, one AdamW update; what `bench sft` compares with), and one training update of `sequences` sequences in
# micro-batches of `micro_batch`, each micro-batch its own AdamW update (clipped surrogate with an
# entropy bonus, global-norm clip, weight decay on matrices only), prompt tokens outside the loss.
# Only torch is needed (Debian's python3-torch, 1.13, is enough). Parameter names are HF's, so a
# HuggingFace safetensors file loads as it is; "check_ids" then prints next-token log-probs, which
# engine/torchref's tests compare with the HF golden values.
# Argument: a JSON spec (engine/torchref.Spec); prints one JSON line (engine/torchref.Result).
import glob, json, math, os, struct, sys, time

import torch
import torch.nn.functional as F

spec = json.loads(sys.argv[1])
threads = int(spec.get("threads") or os.cpu_count() or 1)
torch.set_num_threads(threads)
torch.manual_seed(int(spec.get("seed") or 1))
H, I, L = spec["hidden_size"], spec["intermediate_size"], spec["num_hidden_layers"]
NH, NKV, HD, V = spec["num_attention_heads"], spec["num_key_value_heads"], spec["head_dim"], spec["vocab_size"]
EPS, THETA = spec["rms_norm_eps"], spec["rope_theta"]
QK_NORM = spec["model_type"] == "qwen3"
BIAS, TIED = bool(spec.get("attention_bias")), bool(spec.get("tie_word_embeddings"))


class RMSNorm(torch.nn.Module):
    def __init__(self, n):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(n))

    def forward(self, x):
        x32 = x.float()
        return self.weight * (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + EPS)).to(x.dtype)


INV_FREQ = 1.0 / (THETA ** (torch.arange(0, HD, 2, dtype=torch.float32) / HD))


def rope(x, pos):  # x [B, heads, T, HD], pos [B, T]
    ang = pos[:, None, :, None].float() * INV_FREQ  # [B, 1, T, HD/2]
    ang = torch.cat([ang, ang], -1)
    x1, x2 = x[..., : HD // 2], x[..., HD // 2 :]
    return x * ang.cos() + torch.cat([-x2, x1], -1) * ang.sin()


class Attention(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.q_proj = torch.nn.Linear(H, NH * HD, bias=BIAS)
        self.k_proj = torch.nn.Linear(H, NKV * HD, bias=BIAS)
        self.v_proj = torch.nn.Linear(H, NKV * HD, bias=BIAS)
        self.o_proj = torch.nn.Linear(NH * HD, H, bias=False)
        if QK_NORM:
            self.q_norm, self.k_norm = RMSNorm(HD), RMSNorm(HD)

    def forward(self, x, pos, cache):
        B, T, _ = x.shape
        q, k = self.q_proj(x).view(B, T, NH, HD), self.k_proj(x).view(B, T, NKV, HD)
        v = self.v_proj(x).view(B, T, NKV, HD).transpose(1, 2)
        if QK_NORM:
            q, k = self.q_norm(q), self.k_norm(k)
        q, k = rope(q.transpose(1, 2), pos), rope(k.transpose(1, 2), pos)
        if cache is not None:
            if cache[0] is not None:
                k, v = torch.cat([cache[0], k], 2), torch.cat([cache[1], v], 2)
            cache[0], cache[1] = k, v
        k, v = k.repeat_interleave(NH // NKV, 1), v.repeat_interleave(NH // NKV, 1)
        S = k.shape[2]
        att = (q @ k.transpose(-1, -2)).float() / math.sqrt(HD)
        if T > 1:
            att = att.masked_fill(~torch.ones(T, S, dtype=torch.bool).tril(S - T), float("-inf"))
        out = att.softmax(-1).to(v.dtype) @ v
        return self.o_proj(out.transpose(1, 2).reshape(B, T, NH * HD))


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.gate_proj = torch.nn.Linear(H, I, bias=False)
        self.up_proj = torch.nn.Linear(H, I, bias=False)
        self.down_proj = torch.nn.Linear(I, H, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Layer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.self_attn, self.mlp = Attention(), MLP()
        self.input_layernorm, self.post_attention_layernorm = RMSNorm(H), RMSNorm(H)

    def forward(self, x, pos, cache):
        x = x + self.self_attn(self.input_layernorm(x), pos, cache)
        return x + self.mlp(self.post_attention_layernorm(x))


class Decoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed_tokens = torch.nn.Embedding(V, H)
        self.layers = torch.nn.ModuleList([Layer() for _ in range(L)])
        self.norm = RMSNorm(H)


class CausalLM(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.model = Decoder()
        if not TIED:
            self.lm_head = torch.nn.Linear(H, V, bias=False)

    def forward(self, ids, pos, caches=None):  # logits [B, T, V] in float32
        x = self.model.embed_tokens(ids)
        for i, layer in enumerate(self.model.layers):
            x = layer(x, pos, None if caches is None else caches[i])
        head = self.model.embed_tokens.weight if TIED else self.lm_head.weight
        return (self.model.norm(x) @ head.T).float()


def load_safetensors(path):
    files = sorted(glob.glob(os.path.join(path, "*.safetensors"))) if os.path.isdir(path) else [path]
    kinds = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}
    out = {}
    for f in files:
        with open(f, "rb") as fh:
            data = fh.read()
        n = struct.unpack("<Q", data[:8])[0]
        for name, t in json.loads(data[8 : 8 + n]).items():
            if name == "__metadata__":
                continue
            a, b = t["data_offsets"]
            raw = bytearray(data[8 + n + a : 8 + n + b])
            out[name] = torch.frombuffer(raw, dtype=kinds[t["dtype"]]).reshape(t["shape"]).float()
    return out


m = CausalLM()
if spec.get("weights"):
    sd = load_safetensors(spec["weights"])
    if TIED:
        sd.pop("lm_head.weight", None)
    m.load_state_dict(sd)
out = {"torch": torch.__version__, "threads": threads, "device": "cpu", "params": sum(p.numel() for p in m.parameters())}


def blas():  # the BLAS torch's matrix products run on: Debian's torch takes whichever libblas.so.3 is selected
    try:
        with open("/proc/self/maps") as f:
            libs = {os.path.realpath(l.split()[-1]) for l in f if "/" in l and any(k in l.lower() for k in ("blas", "mkl_"))}
    except OSError:
        return ""
    return ", ".join(sorted(libs))


out["blas"] = blas()

if spec.get("matmul"):  # torch's own best float32 n×n product for each n: up to 5 timed runs, 0.5 s a size
    best = 0.0
    for k in spec["matmul"]:
        a, b = torch.randn(k, k), torch.randn(k, k)
        a @ b
        spent, reps = 0.0, 0
        while reps < 5 and (reps == 0 or spent < 0.5):
            t0 = time.perf_counter()
            a @ b
            d = time.perf_counter() - t0
            spent, reps, best = spent + d, reps + 1, max(best, 2 * k**3 / d)
    out["matmul"], out["matmul_flops_per_s"] = spec["matmul"], best

if spec.get("check_ids"):
    ids = torch.tensor([spec["check_ids"]])
    with torch.inference_mode():
        lp = m(ids, torch.arange(ids.shape[1])[None]).log_softmax(-1)
    out["check_logprobs"] = lp[0, :-1].gather(-1, ids[0, 1:, None]).squeeze(-1).tolist()

if spec.get("decode"):
    d = spec["decode"]
    B, P, N, n = d["slots"], d["prompt_len"], d["new_tokens"], d["sequences"]
    rounds = [B] * (n // B) + ([n % B] if n % B else [])
    steps = 0

    def generate(b):  # P prompt tokens in one prefill, then N sampled tokens, the first from the prefill
        ids = torch.randint(0, V, (b, P))
        caches = [[None, None] for _ in range(L)]
        lp = m(ids, torch.arange(P).expand(b, P), caches)[:, -1].log_softmax(-1)
        for t in range(N):
            tok = torch.multinomial(lp.exp(), 1)
            lp.gather(-1, tok)  # the sampled token's log-prob, which the engine records
            if t + 1 < N:
                lp = m(tok, torch.full((b, 1), P + t), caches)[:, -1].log_softmax(-1)
        return N

    with torch.inference_mode():
        generate(B)  # warm-up
        t0 = time.perf_counter()
        for b in rounds:
            steps += generate(b)
        wall = time.perf_counter() - t0
    out["decode"] = {"tokens": n * N, "wall_s": wall, "tokens_per_s": n * N / wall, "step_ms": 1000 * wall / steps}

if spec.get("train"):
    c = spec["train"]
    n, T, prompt = c["sequences"], c["length"], c["prompt"]
    mb = c.get("micro_batch") or n
    decay = [p for p in m.parameters() if p.dim() >= 2]
    rest = [p for p in m.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": rest, "weight_decay": 0.0}], lr=1e-5)
    ids = torch.randint(0, V, (n, T))
    old = -torch.rand(n, T - 1) * 3
    adv = torch.randn(n, 1).expand(n, T - 1)
    mask = torch.zeros(n, T - 1)
    mask[:, max(prompt, 1) - 1 :] = 1  # position p predicts token p + 1; tokens ≥ prompt are trained
    pos = torch.arange(T).expand(mb, T)

    def update():  # one AdamW update per micro-batch, as the CPU recipe (grad_accumulation 1)
        for s in range(0, n, mb):
            x, mk, a = ids[s : s + mb], mask[s : s + mb], adv[s : s + mb]
            opt.zero_grad(set_to_none=True)
            lp = m(x, pos[: x.shape[0]])[:, :-1].log_softmax(-1)
            ratio = (lp.gather(-1, x[:, 1:, None]).squeeze(-1) - old[s : s + mb]).exp()
            pg = -torch.min(ratio * a, ratio.clamp(0.8, 1.28) * a)
            ent = -(lp.exp() * lp).sum(-1)
            (((pg - 0.01 * ent) * mk).sum() / mk.sum().clamp(min=1)).backward()
            torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
            opt.step()

    t0 = time.perf_counter()
    update()  # warm-up, not timed (as the Go side's first, compiling update)
    first = time.perf_counter() - t0
    best = float("inf")
    for _ in range(c.get("updates") or 2):
        t0 = time.perf_counter()
        update()
        best = min(best, time.perf_counter() - t0)
    trained = int(mask.sum().item())
    out["train"] = {"trained_tokens": trained, "update_s": best, "tokens_per_s": trained / best,
                    "micro_step_ms": 1000 * best / math.ceil(n / mb), "first_update_s": first}

if spec.get("sft"):  # a supervised step: cross-entropy, gradients accumulated, one AdamW update
    c = spec["sft"]
    n, T, prompt = c["sequences"], c["length"], c["prompt"]
    mb = c.get("micro_batch") or n
    decay = [p for p in m.parameters() if p.dim() >= 2]
    rest = [p for p in m.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": rest, "weight_decay": 0.0}], lr=1e-5)
    ids = torch.randint(0, V, (n, T))
    labels = ids[:, 1:].clone()
    labels[:, : max(prompt, 1) - 1] = -100  # position p predicts token p + 1; tokens ≥ prompt are trained
    pos = torch.arange(T).expand(mb, T)
    trained = int((labels != -100).sum().item())

    def step():
        opt.zero_grad(set_to_none=True)
        for s in range(0, n, mb):
            x, y = ids[s : s + mb], labels[s : s + mb]
            logits = m(x, pos[: x.shape[0]])[:, :-1]
            (F.cross_entropy(logits.reshape(-1, V), y.reshape(-1), ignore_index=-100, reduction="sum") / trained).backward()
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step()

    t0 = time.perf_counter()
    step()  # warm-up, not timed
    first = time.perf_counter() - t0
    best = float("inf")
    for _ in range(c.get("updates") or 2):
        t0 = time.perf_counter()
        step()
        best = min(best, time.perf_counter() - t0)
    out["sft"] = {"trained_tokens": trained, "update_s": best, "tokens_per_s": trained / best,
                  "micro_step_ms": 1000 * best / math.ceil(n / mb), "first_update_s": first}

print(json.dumps(out))
