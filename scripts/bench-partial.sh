#!/bin/sh
# bench-partial.sh: trained tokens per second over whole RL steps (rollout + score + reference +
# advantage + train + sync) on the long-tail workload, synchronous then with partial rollouts,
# one after the other on this machine, and the ratio. Usage (after make build):
#
#   scripts/bench-partial.sh [STEPS] [extra --set flags...]
#
# Each run: STEPS steps (default 4) of recipes/retool.yaml without evaluations, env.long_tail
# share 0.1 of 16 turns; the partial run adds rollout.partial (over_sample 2, max_staleness 1).
# Trained tokens are the policy tokens of the trajectories each step trained (their `pieces`
# in the JSON events); a partial run's paused trajectories count where they finally train.
# BENCH_PARTIAL_JSON=1 adds the result as one JSON line at the end (scripts/gpu-check.sh reads it).
set -eu
steps=${1:-4}
[ $# -gt 0 ] && shift
bin=${AGENTRL_BIN:-bin/agentrl-tui}
out=${TMPDIR:-/tmp}/bench-partial.$$
mkdir -p "$out"
common="--max-steps $steps --set eval.at_start=false --set eval.every=0 --set checkpoint.keep_best=0 \
  --set early_stop.patience=0 --set early_stop.max_drop=0 --set checkpoint.every=0 \
  --set env.long_tail.share=0.1 --set rollout.max_turns=16 --set rollout.max_total_tokens=1024"
# shellcheck disable=SC2086
"$bin" --ui json recipes/retool.yaml $common "$@" --store "$out/sync.db" >"$out/sync.jsonl" 2>"$out/sync.err"
# shellcheck disable=SC2086
"$bin" --ui json recipes/retool.yaml $common --set rollout.partial.enabled=true "$@" --store "$out/partial.db" >"$out/partial.jsonl" 2>"$out/partial.err"
python3 - "$out/sync.jsonl" "$out/partial.jsonl" <<'PY'
import json, os, sys
STEP = {"rollout", "score", "reference", "advantage", "train", "sync"}
res, sides = {}, {}
for name, path in zip(("sync", "partial"), sys.argv[1:]):
    secs = rollout = tokens = 0.0
    occ, tails, extra = [], [], {}
    for line in open(path):
        e = json.loads(line)
        t = e.get("type")
        if t == "phase" and e["phase"] in STEP and e["step"] > 0:
            secs += e["seconds"]
            if e["phase"] == "rollout":
                rollout += e["seconds"]
        elif t == "trajectory" and not e.get("eval") and not e.get("paused"):
            tokens += len(e.get("pieces") or [])
        elif t == "generation" and e["phase"] == "rollout":
            occ.append(e["occupancy"]); tails.append(e["tail_s"])
        elif t == "metrics":
            for k in ("paused", "resumed", "stale_dropped", "staleness_mean"):
                if k in e["metrics"]:
                    extra.setdefault(k, []).append(e["metrics"][k])
    res[name] = tokens / secs
    sides[name] = {"tokens": tokens, "seconds": secs, "rollout_s": rollout, "tokens_per_s": tokens / secs,
                   "occupancy": sum(occ) / len(occ), "tail_s": sum(tails) / len(tails)}
    print(f"{name:8s} {tokens:8.0f} trained tokens in {secs:7.1f} s of steps ({rollout:6.1f} s rollout): "
          f"{tokens/secs:6.1f} tokens/s; occupancy {sum(occ)/len(occ):.2f}, tail {sum(tails)/len(tails):.2f} s mean"
          + "".join(f"; {k} {sum(v)/len(v):.2f}" for k, v in extra.items()))
print(f"ratio    {res['partial']/res['sync']:.2f}x")
if os.environ.get("BENCH_PARTIAL_JSON"):  # one JSON line last, for gpu-check's report
    print(json.dumps({"sync": sides["sync"], "partial": sides["partial"], "ratio": res["partial"] / res["sync"]}))
PY
echo "events and stores in $out" >&2
