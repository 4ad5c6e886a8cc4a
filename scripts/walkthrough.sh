#!/usr/bin/env bash
# The README walkthrough: every sub-command of docs/commands.md that takes under two minutes, as written.
# Usage: scripts/walkthrough.sh [REPO]  (after make build; writes /tmp/walk/out/NN-name.{out,rc,s} and prints a line per command)
set -u
R=${1:-$(cd "$(dirname "$0")/.." && pwd)}; cd "$R"
B=./bin/agentrl-tui
O=/tmp/walk/out; rm -rf $O /tmp/walk/s.db /tmp/walk/cb.db /tmp/walk/tok /tmp/walk/exp /tmp/walk/exp16 /tmp/walk/sft /tmp/walk/tb /tmp/walk/m.csv /tmp/walk/t.parquet; mkdir -p $O
n=0
step() { # name, command...
  n=$((n+1)); local name=$(printf '%02d-%s' $n "$1"); shift
  local t0=$(date +%s%N)
  timeout 600 bash -c "$*" > $O/$name.out 2>&1; echo $? > $O/$name.rc
  local t1=$(date +%s%N); printf "%d.%01d\n" $(( (t1 - t0) / 1000000000 )) $(( (t1 - t0) / 100000000 % 10 )) > $O/$name.s
  printf '%-28s rc=%s %6.1fs  %s\n' "$name" "$(cat $O/$name.rc)" "$(cat $O/$name.s)" "$(tail -c 160 $O/$name.out | tr '\n' ' ' | cut -c1-150)"
}
step help "$B --help"
step run-short "$B run recipes/retool.yaml --ui plain --store /tmp/walk/s.db --max-steps 2 --set eval.at_start=false --set eval.every=2 --set eval.heldout_tasks=8 --set eval.validation_tasks=0 --set checkpoint.every=1"
step runs "$B runs --store /tmp/walk/s.db"
step runs-json "$B runs --store /tmp/walk/s.db --json"
RUN=$($B runs --store /tmp/walk/s.db --json 2>/dev/null | python3 -c 'import json,sys; d=json.load(sys.stdin); r=d if isinstance(d,list) else d.get("runs",d); print(r[0]["id"] if "id" in r[0] else r[0]["run"])' 2>/dev/null)
echo "RUN=$RUN"
step resume "$B resume --store /tmp/walk/s.db $RUN --ui plain"
step export "$B export --store /tmp/walk/s.db --run $RUN /tmp/walk/exp && ls /tmp/walk/exp"
step generate-prompt "$B generate --model testdata/builtin --prompt 'What is 77 + 87?' --max-new 64"
step generate-raw "$B generate --model testdata/builtin --prompt 'What is 77 + 87?' --raw --max-new 16"
step generate-ids "$B generate --model testdata/builtin --ids 1,2,3 --max-new 8 --json"
step generate-exported "$B generate --model /tmp/walk/exp --prompt 'What is 12 * 34?' --max-new 64"
step bench-rollout "$B bench rollout --model testdata/builtin --sequences 16 --new 32"
step bench-train "$B bench train --model testdata/builtin --updates 1"
step kernels "$B kernels"
step kernels-env "$B kernels --env"
step doctor "$B doctor"
step tool-run "echo 'print(6*7)' | $B tool run --executor starlark"
step tool-run-py "echo 'print(6*7)' | $B tool run --executor python"
step tokenizer-train "$B tokenizer train --corpus README.md --vocab 400 --out /tmp/walk/tok && ls /tmp/walk/tok"
step sft "$B sft --recipe recipes/retool.yaml --out /tmp/walk/sft --steps 5 --examples 32"
step plan "$B plan recipes/retool.yaml"
step plan-4b "$B plan recipes/retool-qwen3-4b.yaml --shape qwen3-4b --vram 96GiB"
step plan-nofit "$B plan recipes/retool-qwen3-4b.yaml --shape qwen3-4b --vram 8GiB; echo exit=\$?"
step tokenize "$B tokenize --tokenizer testdata/builtin 'What is 2+2?'"
step score "$B score --model testdata/builtin --ids 1,2,3,4 --greedy 4"
step completion "$B completion bash | head -3"
step serve "($B serve --addr 127.0.0.1:18123 & echo \$! > /tmp/walk/serve.pid; sleep 8; curl -s 127.0.0.1:18123/v1/models; kill \$(cat /tmp/walk/serve.pid); wait) "
step verify "echo 'so the answer is \\boxed{\\frac12}' | $B verify --truth 0.5"
step verify-no "echo 'Answer: 3, 7' | $B verify --truth 7"
step data-inspect "$B data inspect testdata/data/dapo-verl.parquet"
step data-inspect-json "$B data inspect testdata/data/aime2024 --json | head -c 400"
step data-inspect-bad "$B data inspect testdata/data/bad/no-answer.jsonl; echo exit=\$?"
step eval "$B eval recipes/retool.yaml --ui plain --store /tmp/walk/s.db --samples 2 --set eval.heldout_tasks=8 --set eval.ks=1,2"
step eval-ckpt "$B eval recipes/retool.yaml --ui plain --store /tmp/walk/s.db --run $RUN --step 2 --samples 2 --set eval.heldout_tasks=8 --set eval.ks=1,2"
step compare "$B compare --store /tmp/walk/s.db $RUN \$($B runs --store /tmp/walk/s.db --json | python3 -c 'import json,sys; print([r[\"id\"] for r in json.load(sys.stdin) if r.get(\"kind\")==\"eval\"][0])')"
step export-bf16 "$B export --store /tmp/walk/s.db --run $RUN --dtype bf16 /tmp/walk/exp16 && ls /tmp/walk/exp16"
step export-numbers "$B export --store /tmp/walk/s.db --run $RUN --tensorboard /tmp/walk/tb --metrics /tmp/walk/m.csv --trajectories /tmp/walk/t.parquet && head -c 200 /tmp/walk/m.csv"
step tool-run-format "printf 'Let me see.\n<code>\n\`\`\`python\nprint(6*7)\n\`\`\`\n</code>' | $B tool run --format retool --executor python"
step plan-host "$B plan recipes/retool-qwen3-4b.yaml --shape qwen3-4b --vram 96GiB | tail -4"
step doctor-recipe "$B doctor recipes/retool.yaml | tail -12"
step compile-budget "$B recipes/retool.yaml --max-steps 3 --ui json --store /tmp/walk/cb.db --set eval.heldout_tasks=8 --set eval.n_samples=8 --set eval.validation_tasks=8 --set eval.every=1 | python3 -c '
import json,sys
last=None
for l in sys.stdin:
    e=json.loads(l)
    if e.get(\"type\")==\"metrics\" and \"compiles\" in e: last=e
    if e.get(\"type\")==\"metrics\": print(\"step\", e.get(\"step\"), \"compiles\", e.get(\"metrics\",{}).get(\"compiles\"), \"new\", e.get(\"metrics\",{}).get(\"compiles_new\"))
print({k:v[\"programs\"] for k,v in (last or {}).get(\"compiles\",{}).items()})
'"
