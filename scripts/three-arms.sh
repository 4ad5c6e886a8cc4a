#!/usr/bin/env bash
# The seed's comparison on the CPU, three arms of recipes/retool.yaml on the built-in model, each
# over SEEDS: baseline RL (outcome-only GRPO, recipes/retool-baseline.yaml), Hybrid with the rules
# hinter (recipes/retool.yaml as shipped), and Hybrid with the model PRM — the built-in model as
# the run's reference judging every trajectory, its bridge thoughts the teacher's hints, its
# verdicts step-wise advantages. Every run at once, each in a store of its own (a running run
# holds its store's lock), then compare reads them all: pass@k since step 0 and arm against arm
# with paired standard errors, and the three-seed means.
#
#   BIN=bin/agentrl-tui SEEDS="1 2 3" STEPS=30 scripts/three-arms.sh OUTDIR
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
bin=${BIN:-$repo/bin/agentrl-tui}
seeds=${SEEDS:-1 2 3}
steps=${STEPS:-30}
out=${1:?give the folder for the stores and logs}
mkdir -p "$out"
model=(--set hinter.kind=none --set prm.kind=model --set prm.model=reference --set algorithm.estimator=step_wise)
for s in $seeds; do
  (cd "$repo" && /usr/bin/time -f "%e s" -o "$out/baseline-$s.time" "$bin" --ui plain recipes/retool-baseline.yaml --seed "$s" --max-steps "$steps" --store "$out/b$s.db" > "$out/baseline-$s.log" 2>&1) &
  (cd "$repo" && /usr/bin/time -f "%e s" -o "$out/rules-$s.time" "$bin" --ui plain recipes/retool.yaml --seed "$s" --max-steps "$steps" --store "$out/r$s.db" > "$out/rules-$s.log" 2>&1) &
  (cd "$repo" && /usr/bin/time -f "%e s" -o "$out/model-$s.time" "$bin" --ui plain recipes/retool.yaml --seed "$s" --max-steps "$steps" --store "$out/m$s.db" --run-name retool-hybrid-prm "${model[@]}" > "$out/model-$s.log" 2>&1) &
done
wait
id() { "$bin" runs --store "$1" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["id"])'; }
stores=$(ls "$out"/*.db | paste -sd,)
ids() { local arm=$1; local list=; for s in $seeds; do list="$list${list:+,}$(id "$out/$arm$s.db")"; done; echo "$list"; }
B=$(ids b) R=$(ids r) M=$(ids m)
for pair in "$M $B" "$R $B" "$M $R"; do
  set -- $pair
  echo "== compare $1 against $2"
  "$bin" compare --store "$stores" "$1" "$2"
done
for arm in baseline rules model; do
  for s in $seeds; do printf '%s seed %s: %s\n' "$arm" "$s" "$(cat "$out/$arm-$s.time")"; done
done
