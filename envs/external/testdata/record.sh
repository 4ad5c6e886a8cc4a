#!/bin/sh
# Writes what the agent was given into $OUT (stdin, AGENTRL_TASK, its environment, its working
# folder), then reports a reward.
cat > "$OUT/stdin"
printf '%s' "$AGENTRL_TASK" > "$OUT/task_env"
env > "$OUT/env"
pwd > "$OUT/pwd"
echo "recorded" >&2
echo '{"reward": 1}'
