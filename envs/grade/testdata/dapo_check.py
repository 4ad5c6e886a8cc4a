"""Judges JSON lines {"solution", "truth", "tool_calls"} from stdin with verl's own math_dapo.py.

Usage: python3 dapo_check.py PATH/TO/verl/utils/reward_score/math_dapo.py < rows.jsonl

Prints one line per row: {"strict": [score, acc, pred|null], "minerva": [score, acc, pred],
"verl": shaped score, "slime": shaped score}, the shaping being recipe/retool/retool.py's
min(-0.6, score + (num_turns - 2) / 2 * 0.1) for a negative score, with num_turns = 2*tool_calls+2
(verl's ToolAgentLoop) or tool_calls (slime's tool_call_count).
"""
import importlib.util
import json
import sys

spec = importlib.util.spec_from_file_location("math_dapo", sys.argv[1])
md = importlib.util.module_from_spec(spec)
spec.loader.exec_module(md)


def shape(score, num_turns):
    if score < 0:
        tool_call_reward = (num_turns - 2) / 2 * 0.1
        score = min(-0.6, score + tool_call_reward)
    return score


for line in sys.stdin:
    row = json.loads(line)
    s = md.compute_score(row["solution"], row["truth"], strict_box_verify=True)
    m = md.compute_score(row["solution"], row["truth"])
    k = row.get("tool_calls", 0)
    print(json.dumps({
        "strict": [s["score"], bool(s["acc"]), s["pred"]],
        "minerva": [m["score"], bool(m["acc"]), m["pred"]],
        "verl": shape(s["score"], 2 * k + 2),
        "slime": shape(s["score"], k),
    }, ensure_ascii=False))
