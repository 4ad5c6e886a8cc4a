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
#
# ARMS picks the arms (default "baseline rules model"); MODEL and MODEL2 are --set lists for the
# model arm and for a second model arm ("model2", run only when ARMS names it), e.g.
#   ARMS="baseline model model2" MODEL="hinter.gate=lift" MODEL2="hinter.gate=lift algorithm.estimator=group"
# (each on top of the model arm's own settings).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
bin=${BIN:-$repo/bin/agentrl-tui}
seeds=${SEEDS:-1 2 3}
steps=${STEPS:-30}
arms=${ARMS:-baseline rules model}
out=${1:?give the folder for the stores and logs}
mkdir -p "$out"
model=(--set hinter.kind=none --set prm.kind=model --set prm.model=reference --set algorithm.estimator=step_wise)
sets() { for kv in $1; do printf -- '--set\n%s\n' "$kv"; done; }
mapfile -t extra < <(sets "${MODEL:-}")
mapfile -t extra2 < <(sets "${MODEL2:-}")
declare -A letter=([baseline]=b [rules]=r [model]=m [model2]=n)
run() { # arm seed args...
  local arm=$1 s=$2; shift 2
  (cd "$repo" && /usr/bin/time -f "%e s" -o "$out/$arm-$s.time" "$bin" --ui plain "$@" --seed "$s" --max-steps "$steps" \
    --store "$out/${letter[$arm]}$s.db" > "$out/$arm-$s.log" 2>&1) &
}
for s in $seeds; do
  for arm in $arms; do
    case $arm in
      baseline) run baseline "$s" recipes/retool-baseline.yaml ;;
      rules) run rules "$s" recipes/retool.yaml ;;
      model) run model "$s" recipes/retool.yaml --run-name retool-hybrid-prm "${model[@]}" "${extra[@]}" ;;
      model2) run model2 "$s" recipes/retool.yaml --run-name retool-hybrid-prm2 "${model[@]}" "${extra2[@]}" ;;
      *) echo "three-arms.sh: unknown arm $arm (baseline, rules, model, model2)" >&2; exit 2 ;;
    esac
  done
done
wait
id() { "$bin" runs --store "$1" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["id"])'; }
stores=$(ls "$out"/*.db | paste -sd,)
ids() { local list=; for s in $seeds; do list="$list${list:+,}$(id "$out/$1$s.db")"; done; echo "$list"; }
declare -A runs
for arm in $arms; do runs[$arm]=$(ids "${letter[$arm]}"); done
for a in $arms; do
  for b in $arms; do
    # each arm against the baseline, a model arm against the rules, model against model2
    [[ $a == "$b" || $a == baseline || ($b == model* && $a != model*) || ($a == model2 && $b == model) ]] && continue
    echo "== compare $a against $b"
    "$bin" compare --store "$stores" "${runs[$a]}" "${runs[$b]}"
  done
done
for arm in $arms; do
  for s in $seeds; do printf '%s seed %s: %s\n' "$arm" "$s" "$(cat "$out/$arm-$s.time")"; done
done
