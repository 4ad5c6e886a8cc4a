# Sourced by scripts/gpu-check.sh and scripts/gpu-bench.sh after they set OUT, BUDGET_S, STEP_MAX_S,
# BACKEND and PLUGIN (scripts/gpu-env.sh) and NAME (their name in messages): builds BIN unless
# given, makes OUT/steps with an empty status.tsv, sets DEADLINE (the budget less the report's last
# 15 s) and the backend flags, and defines step, which runs one capped step of the script.
if [ -z "${BIN:-}" ]; then
	BIN=bin/agentrl-tui
	echo "$NAME: building $BIN"
	CGO_ENABLED=1 GOEXPERIMENT=simd go build -o "$BIN" . || exit 1
fi
[ -x "$BIN" ] || { echo "$NAME: $BIN is not an executable; give BIN=path/to/agentrl-tui or unset it to build one"; exit 1; }

STEPS=$OUT/steps
mkdir -p "$STEPS" && : > "$STEPS/status.tsv" || exit 1
DEADLINE=$((SECONDS + BUDGET_S - 15)) # the last 15 s are the report's

backend=(--backend "$BACKEND")
[ "$BACKEND" != go ] && [ -n "$PLUGIN" ] && backend+=(--plugin "$PLUGIN")

# step NAME OUTFILE COMMAND...: runs COMMAND with its standard output in OUTFILE and its standard
# error in steps/NAME.log, stopped when the budget runs out; notes its exit code and seconds.
step() {
	local name=$1 out=$2 left=$((DEADLINE - SECONDS)) rc t0 t1
	shift 2
	[ "$left" -gt "$STEP_MAX_S" ] && left=$STEP_MAX_S
	if [ "$left" -lt 5 ]; then
		echo "$NAME: $name skipped: the ${BUDGET_S}s budget is spent"
		printf '%s\t124\t0\n' "$name" >> "$STEPS/status.tsv"
		return 124
	fi
	echo "$NAME: $name"
	t0=$(date +%s.%N)
	timeout --kill-after=10 "$left" "$@" > "$out" 2> "$STEPS/$name.log"
	rc=$?
	t1=$(date +%s.%N)
	printf '%s\t%d\t%s\n' "$name" "$rc" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')" >> "$STEPS/status.tsv"
	[ "$rc" -eq 0 ] || echo "$NAME: $name failed (exit $rc): $(tail -n 3 "$STEPS/$name.log")"
	return "$rc"
}
