# Sourced by scripts/gpu-check.sh and scripts/gpu-bench.sh after they set OUT, BUDGET_S, STEP_MAX_S,
# BACKEND and PLUGIN (scripts/gpu-env.sh) and NAME (their name in messages): builds BIN unless
# given, makes OUT/steps with an empty status.tsv, sets DEADLINE (the budget less the report's last
# 15 s) and the backend flags, and defines the steps both scripts take: step (one capped command),
# doctor_or_exit, recipe_run (a plan and a short run of a recipe) and train_steps (bench train
# beside PyTorch eager).
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

# doctor_or_exit: doctor, printed, then its JSON as the doctor step; on a machine not ready for the
# GPU path (no GPU, plugin or CUDA libraries), exit 2 after doctor's explanation.
doctor_or_exit() {
	local doctor=(doctor --torch-python "${TORCH_PYTHON:-auto}" "${backend[@]}") rc
	[ "$BACKEND" != go ] && doctor+=(--gpu)
	"$BIN" "${doctor[@]}" 2>&1 | tee "$STEPS/doctor.txt"
	rc=${PIPESTATUS[0]}
	if [ "$rc" -ne 0 ] && [ "$BACKEND" != go ]; then
		echo
		echo "$NAME: this machine is not ready for the GPU path (doctor above says why and what to do); nothing else ran."
		exit 2
	fi
	step doctor "$STEPS/doctor.json" "$BIN" "${doctor[@]}" --json
}

# recipe_run RECIPE MODEL VRAM RUN_NAME KEY=VALUE...: the plan of RECIPE on the model folder MODEL
# (at VRAM; empty: NVML's free memory) and a run of it under an NVML sampler (steps run-plan and
# run), the recipe changed by the KEY=VALUEs, given as AGENTRL_* variables (recipes.Load reads
# them) so that the plan and the run see the same recipe.
recipe_run() {
	local recipe=$1 model=$2 vram=$3 name=$4 kv
	shift 4
	local run_env=() plan=(plan "$recipe" --model "$model" --json)
	for kv in "$@"; do
		run_env+=("AGENTRL_$(printf '%s' "${kv%%=*}" | tr 'a-z.' 'A-Z_')=${kv#*=}")
	done
	[ -n "$vram" ] && plan+=(--vram "$vram")
	step run-plan "$STEPS/run-plan.json" env "${run_env[@]}" "$BIN" "${plan[@]}"
	step run "$STEPS/run.jsonl" "$BIN" dev watch --out "$STEPS/run-peak.json" -- env "${run_env[@]}" \
		"$BIN" run "$recipe" --model "$model" "${backend[@]}" --ui json --store "$OUT/run.db" --run-name "$name"
}

# train_steps CONFIG MODEL_FLAGS...: bench train on the model the flags name, then PyTorch eager's
# update of CONFIG's shape (steps train and torch-train): TRAIN_SEQS sequences of TRAIN_LEN tokens,
# a quarter of them prompt, in micro-batches of TRAIN_MICRO, two timed updates.
train_steps() {
	local config=$1 device=cuda dtype=bfloat16
	shift
	local shape=(--sequences "$TRAIN_SEQS" --length "$TRAIN_LEN" --prompt $((TRAIN_LEN / 4)) --micro-batch "$TRAIN_MICRO" --updates 2)
	step train "$STEPS/train.json" "$BIN" bench train "$@" "${backend[@]}" "${shape[@]}" --json --torch-python ""
	if [ -n "$TORCH_PYTHON" ] && [ -f "$config" ]; then
		[ "$BACKEND" = go ] && device=cpu dtype=float32
		step torch-train "$STEPS/torch-train.json" "$TORCH_PYTHON" scripts/torch_train.py --config "$config" "${shape[@]}" --device "$device" --dtype "$dtype"
	else
		echo "no python with torch found (tried /opt/torch/.venv/bin/python, python3, /usr/bin/python3; set TORCH_PYTHON), or no $config" > "$STEPS/torch-train.log"
	fi
}
