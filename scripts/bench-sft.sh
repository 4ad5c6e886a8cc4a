#!/usr/bin/env bash
# The SFT figures of docs/seed.md's "Make the seed's starting model", on a lent GPU machine (or any):
#   1. bench sft on the CPU (Go backend) against PyTorch eager, built-in model, as many threads as
#      cores;
#   2. on the GPU, one SFT step of the Qwen3-4B shape (random weights) on a 16,384-token
#      conversation, full fine-tune with gradient checkpointing (plan --sft: 70.1 GiB), bf16;
#   3. the same with 8-bit moments (plan --sft: 47.7 GiB).
# Each step is capped (STEP_MAX_S); what it printed lands in $OUT (or ./bench-sft-out).
set -u
BIN=${BIN:-bin/agentrl-tui}
OUT=${OUT:-bench-sft-out}
STEP_MAX_S=${STEP_MAX_S:-200}
mkdir -p "$OUT"
. "$(dirname "$0")/gpu-env.sh"
{ lscpu | grep -E 'Model name|^CPU\(s\)'; nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2> /dev/null; } | tee "$OUT/machine.txt"
step() { # name, then the command
	local name=$1
	shift
	echo "== $name: $*"
	timeout "$STEP_MAX_S" "$@" > "$OUT/$name.out" 2> "$OUT/$name.err"
	echo "rc=$?" >> "$OUT/$name.out"
	cat "$OUT/$name.out"
	tail -3 "$OUT/$name.err"
}
step cpu "$BIN" bench sft --model testdata/builtin --backend go --sequences 8 --length 256 --prompt 64 --micro-batch 4 --torch-python "${TORCH_PYTHON:-}"
if [ -n "$PLUGIN" ]; then
	gpu=(--backend cuda --plugin "$PLUGIN")
	step gpu-4b-16k "$BIN" bench sft --shape qwen3-4b --sequences 1 --length 16384 --prompt 1024 --micro-batch 1 --updates 1 --gradient-checkpointing "${gpu[@]}"
	step gpu-4b-16k-8bit "$BIN" bench sft --shape qwen3-4b --sequences 1 --length 16384 --prompt 1024 --micro-batch 1 --updates 1 --gradient-checkpointing --optimizer-bits 8 "${gpu[@]}"
fi
