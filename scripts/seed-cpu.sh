#!/usr/bin/env bash
# docs/seed.md's "Reproduce the seed's experiment" commands, run on the CPU: the built-in model in
# place of qwen3-4b-retool-sft, the sample files of testdata/data in place of the downloaded
# datasets (laid out as `hf download` lays them out), and the recipe's sizes cut down with --set
# so that each command takes a minute or two on 2 cores. It checks that every command of the
# section runs as written, not what the seed's model scores.
#
#   [BIN=path/to/agentrl-tui] scripts/seed-cpu.sh [WORKDIR]   (default: bin/agentrl-tui and a fresh temporary folder; prints each command and its exit code)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
bin=${BIN:-$repo/bin/agentrl-tui}
recipe=$repo/recipes/retool-qwen3-4b.yaml
work=${1:-$(mktemp -d)}
mkdir -p "$work/datasets/dapo-math-17k" "$work/datasets/aime-2024" "$work/datasets/retool-sft/data"
cp "$repo/testdata/data/retool-sft.jsonl" "$work/datasets/retool-sft/data/train.jsonl"
cp "$repo/testdata/data/dapo-slime.jsonl" "$work/datasets/dapo-math-17k/dapo-math-17k.jsonl"
cp -r "$repo/testdata/data/aime2024/." "$work/datasets/aime-2024/"
cd "$work"
# The CPU stand-ins for the GPU run's sizes: the go backend in float32, 2 problems × 2 samples of
# at most 1,024 tokens (the built-in model's longest: the reference's tools block is 572 of its tokens), 2 samples per held-out problem, 2 validation problems, 2 steps.
small=(--backend go --set model.dtype=f32 --set rollout.tasks_per_step=2 --set rollout.group_size=2
  --set rollout.max_new_tokens=96 --set rollout.max_total_tokens=1024 --set eval.n_samples=2 --set eval.ks=1,2
  --set eval.validation_tasks=2 --set eval.validation_samples=2 --set early_stop.metric=pass@2 --set env.timeout=10s
  --set env.sandbox.workers=2)
run() { echo "+ $*"; "$@"; echo "  exit $?"; }
# The SFT as the README gives it, the built-in model in place of Qwen3-4B-Instruct-2507 (the later
# commands keep the built-in model: the 3 sample conversations make no model worth running).
run "$bin" sft --backend go --data datasets/retool-sft --init "$repo/testdata/builtin" --out models/qwen3-4b-retool-sft \
  --format retool --epochs 3 --batch 128 --micro-batch 1 --lr 1e-5 --min-lr 1e-6 --warmup 0.1 --weight-decay 0.1 --beta2 0.95 --max-len 16384 \
  --gradient-checkpointing --store runs/sft.db --run-name qwen3-4b-retool-sft
run "$bin" plan --sft --shape qwen3-4b --lora 64 || true # exit 1: some rows do not fit
run "$bin" runs --store runs/sft.db
run "$bin" plan "$recipe" --shape qwen3-4b --vram 96GiB
run "$bin" data inspect datasets/dapo-math-17k --recipe "$recipe"
run "$bin" data inspect datasets/aime-2024
run "$bin" eval "$recipe" --store runs/seed.db --ui plain "${small[@]}"
run "$bin" "$recipe" --store runs/seed.db --ui plain --max-steps 2 --run-name baseline "${small[@]}" \
  --set algorithm.name=grpo --set hinter.kind=none --set prm.kind=none --set reward.process=0 --set algorithm.estimator=group --set eval.every=2
# The hybrid run's PRM is the built-in model (the run's reference) in place of Qwen3-4B-Instruct:
# it judges in the short prompt it was taught (its folder's prm_prompt.txt), within its 1,024 positions.
run "$bin" "$recipe" --store runs/seed.db --ui plain --max-steps 2 --run-name hybrid "${small[@]}" --set eval.every=2 \
  --set prm.model=reference
run "$bin" runs --store runs/seed.db
run "$bin" compare --store runs/seed.db baseline hybrid
echo "work folder: $work"
