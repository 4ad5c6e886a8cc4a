#!/usr/bin/env bash
# CPU benchmark record for one machine: the figures issue #36 asks for, taken the same way on
# any x86 CPU (the 2-core dev and CI boxes, or the AVX-512 Xeon that hosts the lent GPUs), so
# that a short device lease is enough to measure the CPU path there too.
#
#   scripts/cpu-bench.sh                 # builds bin/agentrl-tui (GOEXPERIMENT=simd) if BIN is unset
#   BIN=path/to/agentrl-tui CPUS=0,1 RUNS=3 scripts/cpu-bench.sh
#
# Steps, all pinned to CPUS (taskset; default the first two CPUs, the size of the dev machines, so
# that a 16-core host gives comparable figures and both engines get the same two cores):
#   cpu        the CPU's model, flags that matter (avx2, fma, avx512f), load average
#   kernels    `kernels --fresh --json`: every kernel set timed on this CPU, and the one chosen
#   train-N    RUNS × `bench train --model testdata/builtin`: the CPU recipe's update against
#              PyTorch eager on the same shape in the same invocation (TORCH_PYTHON, TORCH_BLAS)
#   rollout-N  RUNS × `bench rollout --slots 16 --sequences 32` against PyTorch's decode
# Then report.md: one table of every run's tokens/s, PyTorch's, the ratio and the BLAS PyTorch
# loaded, with the CPU named.
#
# Sizes for a quick check (the end-to-end test runs it so): TRAIN_ARGS, ROLLOUT_ARGS replace the
# benches' default arguments. COMMIT names the binary's commit in the report (default: the
# checkout's, which is the binary's when the script builds it). Exit code: 0 when every step ran, 1 otherwise.
set -uo pipefail
cd "$(dirname "$0")/.."

OUT=${OUT:-runs/cpu-bench/$(date -u +%Y%m%d-%H%M%S)}
CPUS=${CPUS:-0,1}
RUNS=${RUNS:-3}
MODEL=${MODEL:-testdata/builtin}
TORCH_PYTHON=${TORCH_PYTHON:-auto}
TORCH_BLAS=${TORCH_BLAS:-auto}
TRAIN_ARGS=${TRAIN_ARGS:-}
ROLLOUT_ARGS=${ROLLOUT_ARGS:---slots 16 --sequences 32}

if [ -z "${BIN:-}" ]; then
	BIN=bin/agentrl-tui
	echo "cpu-bench: building $BIN"
	CGO_ENABLED=1 GOEXPERIMENT=simd go build -o "$BIN" . || exit 1
fi
[ -x "$BIN" ] || { echo "cpu-bench: $BIN is not an executable; give BIN=path/to/agentrl-tui or unset it to build one"; exit 1; }
case $RUNS in '' | *[!0-9]* | 0) echo "cpu-bench: RUNS=$RUNS is not a positive number of runs (e.g. RUNS=3)"; exit 1 ;; esac
command -v taskset > /dev/null || { echo "cpu-bench: taskset (util-linux) is needed to pin both engines to CPUS=$CPUS"; exit 1; }
taskset -c "$CPUS" true 2> /dev/null || { echo "cpu-bench: CPUS=$CPUS is not a CPU list this machine has (see nproc; e.g. CPUS=0,1)"; exit 1; }

mkdir -p "$OUT" || exit 1
failed=0
pin=(taskset -c "$CPUS")
# The kernel choice is measured afresh into a cache of the run's own, so that a choice cached by
# an older binary on this machine does not decide the run.
export XDG_CACHE_HOME=$OUT/cache

{
	echo "model: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)"
	echo "cpus: $(nproc --all) on the machine, pinned to $CPUS"
	echo "flags: $(grep -m1 -o -w -E 'avx2|fma|avx512f|avx512bw|avx512vl|avx512_bf16|amx_tile' /proc/cpuinfo | sort -u | tr '\n' ' ')"
	echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
	# the binary's commit when given (COMMIT=…), else the checkout's (the binary may be older)
	echo "commit: ${COMMIT:-$(git rev-parse --short HEAD 2> /dev/null || echo unknown) (the checkout)}"
} > "$OUT/cpu.txt"
cat "$OUT/cpu.txt"

run() { # NAME COMMAND...: stdout to OUT/NAME.json, stderr to OUT/NAME.log
	local name=$1
	shift
	echo "cpu-bench: $name"
	if ! "${pin[@]}" "$@" > "$OUT/$name.json" 2> "$OUT/$name.log"; then
		echo "cpu-bench: $name failed: $(tail -n 3 "$OUT/$name.log")"
		failed=1
	fi
}

run kernels "$BIN" kernels --model "$MODEL" --fresh --json
for i in $(seq 1 "$RUNS"); do
	# shellcheck disable=SC2086 # the *_ARGS are word lists
	run "train-$i" "$BIN" bench train --model "$MODEL" $TRAIN_ARGS --json --torch-python "$TORCH_PYTHON" --torch-blas "$TORCH_BLAS"
	# shellcheck disable=SC2086
	run "rollout-$i" "$BIN" bench rollout --model "$MODEL" $ROLLOUT_ARGS --json --torch-python "$TORCH_PYTHON" --torch-blas "$TORCH_BLAS"
done

python3 - "$OUT" > "$OUT/report.md" << 'EOF' || failed=1
import glob, json, os, sys

out = sys.argv[1]
cpu = dict(l.rstrip("\n").split(": ", 1) for l in open(os.path.join(out, "cpu.txt")) if ": " in l)
print(f"# CPU bench: {cpu.get('model', '?')}\n")
print(f"{cpu.get('cpus', '')}; flags: {cpu.get('flags', '')}; load before: {cpu.get('load', '')}; commit {cpu.get('commit', '?')}\n")

def load(name):
    try:
        with open(os.path.join(out, name + ".json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None

k = load("kernels")
if k:
    timings = ", ".join(f"{t['set']} {t['decode_ms']:.1f}/{t['train_ms']:.0f}" for t in k.get("timings") or [])
    print(f"Kernels chosen: **{k.get('set')}** (decode step / train micro-step in ms: {timings or 'not measured'}).\n")

def blas(ref):
    libs = [l.strip() for l in str(ref.get("blas", "")).split(",") if l.strip()]
    named = [l for l in libs if "openblas" in l.rsplit("/", 1)[-1] or "mkl" in l]
    return (named or libs or ["—"])[0].rsplit("/", 1)[-1]

print("| run | this engine tokens/s | PyTorch tokens/s | ratio | ms a step | PyTorch's BLAS |")
print("|---|---|---|---|---|---|")
for kind, step_key in (("train", "micro_step_ms"), ("rollout", "step_ms")):
    for path in sorted(glob.glob(os.path.join(out, kind + "-*.json")), key=lambda p: int(p.rsplit("-", 1)[1][:-5])):
        name = os.path.basename(path)[:-5]
        d = load(name)
        if not d:
            print(f"| {name} | failed (see {name}.log) | | | | |")
            continue
        ref = d.get("reference") or {}
        why = d.get("reference_skipped") or d.get("reference_error") or ""
        rtps = d.get("reference_tokens_per_s")
        ratio = d.get("ratio")
        print(f"| {name} | {d.get('tokens_per_s', 0):,.0f} | {f'{rtps:,.0f}' if rtps else why or '—'} | "
              f"{f'{ratio:.2f}×' if ratio else '—'} | {d.get(step_key, 0):.1f} | {blas(ref)} |")
EOF
cat "$OUT/report.md"
echo "cpu-bench: everything is in $OUT"
exit "$failed"
