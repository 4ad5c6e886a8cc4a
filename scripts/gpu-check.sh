#!/usr/bin/env bash
# GPU self-check: every GPU claim of docs/ measured in one call of at most 10 minutes, so that
# a device lent for a short while is enough. Not part of CI.
#
#   make gpu-check                     # builds bin/agentrl-tui (cgo) first
#   BIN=/path/to/agentrl-tui scripts/gpu-check.sh
#
# Steps, each a command of the binary (or of the python with torch), in this order, within the
# time left of GPU_CHECK_BUDGET_S (600): doctor --gpu; plan for qwen3-4b at 96 GiB; HF parity of
# testdata/fixtures in float32 and bfloat16 (log-prob error, argmax, greedy through score and
# generate); a random-weight qwen3-0.6b folder; the built-in model and that folder exported as bf16
# shards and loaded in HF transformers (scripts/hf-load-check.py), and transformers' own float32 parity
# on this GPU (scripts/torch-fixture-parity.py); float32 parity again with TF32, Triton GEMMs or
# autotuning off (diagnostic rows); a 3-step run of recipes/retool.yaml on it under an
# NVML sampler, beside the ledger's plan for it; scripts/bench-partial.sh (synchronous vs partial
# rollouts on the long-tail workload, the built-in model); bench rollout at batch 1, 64 and 256 against HF
# generate; bench train at 8 × 1024 and PyTorch eager on the same shape and batch. Nothing comes
# from the network.
#
# Output: OUT (default runs/gpu-check/<UTC time>) holds report.json and report.md (printed at the
# end), the model folder, the run's store, and steps/ with every step's output and log.
# Exit code: 0 when every step ran and every parity row holds; 1 otherwise; 2 when the machine is
# not ready for the GPU path (doctor's explanation is printed; nothing else runs).
#
# GPU_CHECK_BACKEND=go runs the same steps on the CPU; with the GPU_CHECK_* sizes below made tiny
# it is what gpucheck_e2e_test.go runs, so the script is known to work up to the GPU itself.
set -uo pipefail
cd "$(dirname "$0")/.."

BACKEND=${GPU_CHECK_BACKEND:-cuda}
OUT=${OUT:-runs/gpu-check/$(date -u +%Y%m%d-%H%M%S)}
BUDGET_S=${GPU_CHECK_BUDGET_S:-600}
STEP_MAX_S=${GPU_CHECK_STEP_MAX_S:-$BUDGET_S}              # no one step runs longer: a hang costs that, not the rest
SHAPE=${GPU_CHECK_SHAPE:-qwen3-0.6b}                       # the model shape of the benchmarks and the run
LIKE=${GPU_CHECK_LIKE:-}                                   # or: the shape and tokenizer of this model folder
TOKENIZER=${GPU_CHECK_TOKENIZER:-testdata/fixtures/qwen3-tokenizer}
BATCHES=${GPU_CHECK_BATCHES:-1 64 256}
PROMPT_LEN=${GPU_CHECK_PROMPT_LEN:-128}
NEW=${GPU_CHECK_NEW:-128}
TRAIN_SEQS=${GPU_CHECK_TRAIN_SEQS:-8}
TRAIN_LEN=${GPU_CHECK_TRAIN_LEN:-1024}
TRAIN_MICRO=${GPU_CHECK_TRAIN_MICRO:-8}
RECIPE=${GPU_CHECK_RECIPE:-recipes/retool.yaml}
RUN_STEPS=${GPU_CHECK_RUN_STEPS:-3}
RUN_VRAM=${GPU_CHECK_RUN_VRAM:-}                           # the run plan's budget; empty: NVML's free memory
RUN_SET=${GPU_CHECK_RUN_SET:-}                             # more recipe key=value changes for the run
PARTIAL_STEPS=${GPU_CHECK_PARTIAL_STEPS:-4}                # steps of each scripts/bench-partial.sh run; 0 leaves it out
PARTIAL_SET=${GPU_CHECK_PARTIAL_SET:-}                     # more recipe key=value changes for both of its runs
PLAN_SHAPE=${GPU_CHECK_PLAN_SHAPE:-qwen3-4b}
PLAN_VRAM=${GPU_CHECK_PLAN_VRAM:-96GiB}

# PLUGIN, XLA_FLAGS, TORCH_PYTHON where the lent GPU machines keep them (the script is in the repository's root by now)
. scripts/gpu-env.sh

NAME=gpu-check
. scripts/gpu-steps.sh

# 1. doctor: on a machine without a GPU, the plugin or its libraries, stop here.
doctor_or_exit

# 2. figures that need no model folder
step plan "$STEPS/plan.json" "$BIN" plan "$RECIPE" --shape "$PLAN_SHAPE" --vram "$PLAN_VRAM" --json
step parity "$STEPS/parity.json" "$BIN" dev parity --json "${backend[@]}"

# 3. a random-weight model folder and a short recipe run on it
MODEL=$OUT/model
if [ -n "$LIKE" ]; then
	step random-model /dev/null "$BIN" dev random-model --like "$LIKE" --out "$MODEL"
	bench_model=(--model "$MODEL")
else
	step random-model /dev/null "$BIN" dev random-model --shape "$SHAPE" --tokenizer "$TOKENIZER" --out "$MODEL"
	bench_model=(--shape "$SHAPE")
fi
# 3a. the bf16 sharded export loads in HF transformers itself (issue #35): the built-in model and the
# random model folder, written by `export --model` as bf16 shards, scored from the same shards by this
# project (float32, Go backend) and by transformers (float32, CPU). Needs a python with transformers.
HF_LOAD=${GPU_CHECK_HF_LOAD:-1}
if [ "$HF_LOAD" = 1 ] && [ -n "$TORCH_PYTHON" ] && "$TORCH_PYTHON" -c 'import transformers' 2> /dev/null; then
	hf_load() { # NAME FOLDER SHARD_SIZE IDS
		local dir=$OUT/export-$1
		step "export-$1" /dev/null "$BIN" export --model "$2" --dtype bf16 --shard-size "$3" "$dir" &&
			step "score-$1" "$STEPS/score-$1.json" "$BIN" score --model "$dir" --ids "$4" --backend go &&
			step "hf-load-$1" "$STEPS/hf-load-$1.json" "$TORCH_PYTHON" scripts/hf-load-check.py --model "$dir" --ids "$4" \
				--ours "$STEPS/score-$1.json" --tol 1e-3
	}
	hf_load builtin testdata/builtin 256KB 12,45,7,300,21,88,5,140,390,2,66,33,17,250,9,101
	hf_load random "$MODEL" 400MB 9707,11,1879,0,576,374,264,1273,315,279,6366,4361,13,151645,198,40
	# the yardstick of the parity rows: transformers itself, float32, on this GPU against its CPU goldens
	[ "$BACKEND" != go ] && step torch-parity "$STEPS/torch-parity.jsonl" "$TORCH_PYTHON" scripts/torch-fixture-parity.py cuda
elif [ "$HF_LOAD" = 1 ]; then
	echo "gpu-check: hf-load left out: no python with torch and transformers (TORCH_PYTHON=${TORCH_PYTHON:-none})"
fi

# 3b. float32 parity under changed XLA settings, to name what costs float32 its 1e-4 (the first H100
# run measured 1.8-2.2e-4): TF32 off in cuBLAS, XLA's Triton GEMMs off, autotuning off (which also
# says how much of parity's time is autotuning). Diagnostic rows: they do not decide the report's ok.
if [ "$BACKEND" != go ] && [ "${GPU_CHECK_PARITY_VARIANTS:-1}" = 1 ]; then
	xf=${XLA_FLAGS:-}
	step parity-notf32 "$STEPS/parity-notf32.json" env NVIDIA_TF32_OVERRIDE=0 "$BIN" dev parity --dtypes float32 --json "${backend[@]}"
	step parity-notriton "$STEPS/parity-notriton.json" env XLA_FLAGS="$xf --xla_gpu_enable_triton_gemm=false" \
		"$BIN" dev parity --dtypes float32 --json "${backend[@]}"
	step parity-autotune0 "$STEPS/parity-autotune0.json" env XLA_FLAGS="$xf --xla_gpu_autotune_level=0" \
		"$BIN" dev parity --json "${backend[@]}"
fi

# 3c. each float32 op of the forward pass against float64, on the Go backend and on the GPU's
# (dev op-parity): which op puts float32 parity over its 1e-4. Diagnostic rows, seconds each.
step op-parity-go "$STEPS/op-parity-go.json" "$BIN" dev op-parity --json --backend go
[ "$BACKEND" != go ] && step "op-parity-$BACKEND" "$STEPS/op-parity-$BACKEND.json" "$BIN" dev op-parity --json "${backend[@]}"

# A short run of the recipe on that folder: no evaluation, no optimizer state in the checkpoint
# saved at the end.
# shellcheck disable=SC2086 # RUN_SET's words
recipe_run "$RECIPE" "$MODEL" "$RUN_VRAM" gpu-check run.max_steps="$RUN_STEPS" eval.at_start=false eval.every=1000 checkpoint.save_optimizer=false $RUN_SET

# 4. partial rollouts on the long-tail workload (issue #25's goal: 1.5x trained tokens/s over whole
# steps), synchronous then partial, the built-in model on this backend
if [ "$PARTIAL_STEPS" -gt 0 ]; then
	partial_set=()
	for kv in $PARTIAL_SET; do partial_set+=(--set "$kv"); done
	step partial "$STEPS/partial.json" env AGENTRL_BIN="$BIN" BENCH_PARTIAL_JSON=1 TMPDIR="$OUT" \
		scripts/bench-partial.sh "$PARTIAL_STEPS" "${backend[@]}" "${partial_set[@]}"
fi

# 5. benchmarks against the PyTorch references
for b in $BATCHES; do
	step "rollout-$b" "$STEPS/rollout-$b.json" "$BIN" bench rollout "${bench_model[@]}" "${backend[@]}" --slots "$b" --sequences "$b" \
		--prompt-len "$PROMPT_LEN" --new "$NEW" --json --torch-python "${TORCH_PYTHON:-auto}"
done
train_steps "$MODEL/config.json" "${bench_model[@]}"

# 6. the report
echo
"$BIN" dev gpu-report "$STEPS" --out "$OUT"
rc=$?
echo
echo "gpu-check: report in $OUT/report.json and $OUT/report.md"
exit "$rc"
