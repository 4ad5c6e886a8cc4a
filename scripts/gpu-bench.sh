#!/usr/bin/env bash
# GPU benchmarks (issue #49): what no GPU lease has measured yet, in one call of at most 10
# minutes, cheapest first, each step capped and its output written the moment it exists. Not part
# of CI.
#
#   make gpu-bench                                   # builds bin/agentrl-tui (cgo) first
#   BIN=path/to/agentrl-tui GPU_BENCH_CACHE=dir scripts/gpu-bench.sh   # a prebuilt binary; a
#                                                    # compilation cache to reuse (default
#                                                    # runs/gpu-bench/xla-cache: a second call on the
#                                                    # same machine starts with the first's programs)
#
# Steps, in this order, within GPU_BENCH_BUDGET_S (570) and each within GPU_BENCH_STEP_MAX_S (150):
#   1. doctor --gpu (exit 2 when the GPU path is not ready: nothing else runs)
#   2. decode on SMALL (qwen3-0.6b, random weights): bench rollout at batch 64 against transformers'
#      generate on the same GPU and the bandwidth roofline; the same command started again without
#      the reference (the second start: its programs loaded from the compilation cache); batch 256
#   3. decode on LARGE (qwen3-4b) at batch 64 and 256, against generate
#   4. one step of RECIPE (recipes/retool-qwen3-4b.yaml) on a random-weight LARGE folder, lengths cut
#      and data and PRM given by STEP_SET, every phase timed, the NVML peak beside the ledger's plan
#   5. bench train on LARGE beside PyTorch eager (scripts/torch_train.py, bf16 autocast)
#   6. HF parity of testdata/fixtures (dev parity), float32 and bfloat16
# LARGE runs at full depth when at least GPU_BENCH_FULL_DEPTH_S (360) seconds are left before its
# first step; otherwise at GPU_BENCH_FEW_LAYERS (8) of its layers, as the shape LARGE:N that every
# row and the report name. SMALL and LARGE may be model folders instead of shape names (never cut).
#
# Output: OUT (default runs/gpu-bench/<UTC time>) holds report.json and report.md (gpu-check's
# report: a row per figure, a row per goal of #49 — decode ≥ 3× generate at batch 64, an update ≥
# 1.0× PyTorch eager, a second start compiling in < 10 s —, the steps), the model folder, the run's
# store, and steps/ with every step's output and log. Exit code: 0 when every step ran and every
# parity row holds; 1 otherwise; 2 when the machine is not ready for the GPU path.
#
# GPU_BENCH_BACKEND=go runs the same steps on the CPU; with the sizes made tiny it is what
# gpubench_e2e_test.go runs, so the script is known to work up to the GPU itself.
set -uo pipefail
cd "$(dirname "$0")/.."

NAME=gpu-bench
BACKEND=${GPU_BENCH_BACKEND:-cuda}
OUT=${OUT:-runs/gpu-bench/$(date -u +%Y%m%d-%H%M%S)}
BUDGET_S=${GPU_BENCH_BUDGET_S:-570}
STEP_MAX_S=${GPU_BENCH_STEP_MAX_S:-150}
CACHE=${GPU_BENCH_CACHE:-runs/gpu-bench/xla-cache}
SMALL=${GPU_BENCH_SMALL:-qwen3-0.6b}
LARGE=${GPU_BENCH_LARGE:-qwen3-4b}
FULL_DEPTH_S=${GPU_BENCH_FULL_DEPTH_S:-360}
FEW_LAYERS=${GPU_BENCH_FEW_LAYERS:-8}
BATCHES=${GPU_BENCH_BATCHES:-64 256}
PROMPT_LEN=${GPU_BENCH_PROMPT_LEN:-128}
NEW=${GPU_BENCH_NEW:-128}
TOKENIZER=${GPU_BENCH_TOKENIZER:-testdata/fixtures/qwen3-tokenizer}
RECIPE=${GPU_BENCH_RECIPE:-recipes/retool-qwen3-4b.yaml}
MODEL=$OUT/model # the random-weight folder of the large shape, for the recipe step
# the seed's step with its lengths cut to fit the time: 4 tasks × 4 samples, 2 turns, 512 new
# tokens a turn in 2,048-token slots; the PRM (the seed's separate 4B judge) a second random
# folder of the same shape — the same folder — replying in at most 256 tokens; the repository's
# DAPO and AIME samples in place of the downloads (testdata/data, the layouts slime's conversion
# writes); no evaluation; no optimizer state in the checkpoint at the end
STEP_SET=${GPU_BENCH_STEP_SET:-rollout.tasks_per_step=4 rollout.group_size=4 rollout.max_turns=2 rollout.max_new_tokens=512 rollout.max_total_tokens=2048 eval.max_new_tokens=512 eval.max_total_tokens=2048 prm.model=$MODEL prm.max_new_tokens=256 data.train=testdata/data/dapo-slime.jsonl data.eval=aime24=testdata/data/aime2024}
STEP_VRAM=${GPU_BENCH_STEP_VRAM:-}                        # the step's plan budget; empty: NVML's free memory
TRAIN_SEQS=${GPU_BENCH_TRAIN_SEQS:-8}
TRAIN_LEN=${GPU_BENCH_TRAIN_LEN:-1024}
TRAIN_MICRO=${GPU_BENCH_TRAIN_MICRO:-4}

# PLUGIN, XLA_FLAGS, TORCH_PYTHON where the lent GPU machines keep them
. scripts/gpu-env.sh
# BIN, STEPS, DEADLINE, backend, step
. scripts/gpu-steps.sh
mkdir -p "$CACHE" || exit 1
echo "$NAME: compilation cache $CACHE ($(find "$CACHE" -name '*.pjrt' | wc -l) programs in it)"

# 1. doctor: on a machine without a GPU, the plugin or its libraries, stop here.
doctor_or_exit

# model MODEL: sets mflags to the flags naming a shape (random weights) or a model folder
model() { if [ -d "$1" ]; then mflags=(--model "$1"); else mflags=(--shape "$1"); fi; }

# rollout TAG MODEL BATCH TORCH_PYTHON: bench rollout, through the compilation cache
rollout() {
	model "$2"
	step "rollout-$1-$3" "$STEPS/rollout-$1-$3.json" "$BIN" bench rollout "${mflags[@]}" "${backend[@]}" --compile-cache "$CACHE" \
		--slots "$3" --sequences "$3" --prompt-len "$PROMPT_LEN" --new "$NEW" --json --torch-python "$4"
}

# 2. decode on the small model; the first batch twice: the second start
again=1
for b in $BATCHES; do
	rollout small "$SMALL" "$b" "${TORCH_PYTHON:-auto}"
	if [ "$again" = 1 ]; then
		rollout small-again "$SMALL" "$b" ""
		again=0
	fi
done

# 3. the large model: full depth if the time left allows its first compile, else fewer layers
left=$((DEADLINE - SECONDS))
L=$LARGE
if [ ! -d "$LARGE" ] && [ "$left" -lt "$FULL_DEPTH_S" ]; then
	L=$LARGE:$FEW_LAYERS
	echo "$NAME: ${left}s left, under the ${FULL_DEPTH_S}s a first full-depth compile of $LARGE needs: $LARGE runs at $FEW_LAYERS layers ($L) from here on"
fi
for b in $BATCHES; do
	rollout large "$L" "$b" "${TORCH_PYTHON:-auto}"
done

# 4. one step of the seed's recipe on a random-weight folder of that shape
if [ -d "$L" ]; then
	step random-model /dev/null "$BIN" dev random-model --like "$L" --out "$MODEL"
else
	step random-model /dev/null "$BIN" dev random-model --shape "$L" --tokenizer "$TOKENIZER" --out "$MODEL"
fi
# shellcheck disable=SC2086 # STEP_SET's words
recipe_run "$RECIPE" "$MODEL" "$STEP_VRAM" gpu-bench run.max_steps=1 eval.at_start=false eval.every=1000 checkpoint.save_optimizer=false \
	"backend.compile_cache=$CACHE" $STEP_SET

# 5. an update of the large model beside PyTorch eager
model "$L"
train_steps "$MODEL/config.json" "${mflags[@]}" --compile-cache "$CACHE"

# 6. parity last: the figures above are what no lease has measured yet
step parity "$STEPS/parity.json" "$BIN" dev parity --json "${backend[@]}" --compile-cache "$CACHE"

# the report
echo
"$BIN" dev gpu-report "$STEPS" --out "$OUT"
rc=$?
echo
echo "$NAME: report in $OUT/report.json and $OUT/report.md; compilation cache $CACHE ($(find "$CACHE" -name '*.pjrt' | wc -l) programs)"
exit "$rc"
