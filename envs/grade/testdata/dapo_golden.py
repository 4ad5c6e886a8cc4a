"""Writes golden verdicts of verl's own math_dapo.py for envs/grade's Go port to match.

Usage: python3 dapo_golden.py PATH/TO/verl/utils/reward_score/math_dapo.py N SEED > dapo_golden.jsonl

It imports the real source file (standard library only) and, for N generated responses and truths
(random compositions of the fragments the grader's rules react to, and responses built around a
boxed or "Answer:" truth), writes one JSON line:
{"solution", "truth", "strict": [score, acc, pred|null], "minerva": [score, acc, pred],
 "normalized": normalize_final_answer(truth), "last_boxed": last_boxed_only_string(solution)|null}
"""
import importlib.util
import json
import random
import sys

spec = importlib.util.spec_from_file_location("math_dapo", sys.argv[1])
md = importlib.util.module_from_spec(spec)
spec.loader.exec_module(md)
n, seed = int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(seed)

FRAGS = [
    "\\boxed{", "\\boxed ", "\\fbox{", "{", "}", "}", "$", "$$", "Answer", "answer", "ANSWER", "AnſWER",
    ":", " : ", " ", "  ", "\n", "\t", "\u00a0", "\u2003", "\x0b", "\x1c", "=", "\\frac", "frac12",
    "fracab", "sqrt2", "\\sqrt", "sqrt{3}", "\\text{", "\\textbf{", "\\overline{", "mbox{", "an ", "a ",
    ".$", "\\$", "\\ ", ",\\text{and}", "\\text{and}", "\\text{m}", "square", "units", "ways", "\\ldots",
    "\\text{\ns}", "\\text{}", "^\\circ", "^{\\circ}", "{,}", '"', "\\dots", "1,000", "12", "0.5", "033",
    "\\frac{1}{2}", "\u00b2", "\u2460", "\u0663", "\u017f", "\u00e9", "\u6570", "x", "\\pi", "<|im_end|>",
    ",", "-", "(", ")", "degrees", ",\\!", "\\;", "The answer is ", "so ", "\\mathrm{th}", "cm", "km",
    "students", "\\(", "\\)", "\\]", "\\[", "**", "Answer:", "Answer: ", "\\boxed{}", "7", "42", "\\dfrac",
]
TRUTHS = ["42", "7", "033", "33", "\\frac{1}{2}", "0.5", "1000", "1,000", "\\pi", "x", "", " 42", "42 ",
          "(A)", "\\text{(A)}", "2\\sqrt{3}", "\\sqrt{3}", "\u00b2", "12", "5 units", "a 5", "$5$", "=5"]


def frag_string(k):
    return "".join(rng.choice(FRAGS) for _ in range(k))


def case():
    kind = rng.random()
    truth = rng.choice(TRUTHS) if rng.random() < 0.6 else frag_string(rng.randint(0, 4))
    if kind < 0.35:
        body = frag_string(rng.randint(0, 40))
        sol = body + rng.choice(["\\boxed{", "\\boxed{ ", "\\boxed {", "\\fbox{", "Answer: ", "Answer: \\boxed{"]) + \
            (truth if rng.random() < 0.7 else frag_string(rng.randint(0, 3))) + \
            rng.choice(["}", "}$", "}.", "", "}}", " }", "\n"]) + frag_string(rng.randint(0, 6))
    elif kind < 0.5:
        # long responses: the 300 and 100 character cuts
        sol = ("x" * rng.randint(0, 400)) + "\\boxed{" + truth + "}" + ("y" * rng.randint(0, 120)) + \
            rng.choice(["", "\u6570" * rng.randint(1, 120), "é" * rng.randint(1, 120)])
    else:
        sol = frag_string(rng.randint(0, 60))
    return sol, truth


def opt(x):
    return None if x is None else x


seen = set()
out = 0
while out < n:
    sol, truth = case()
    if (sol, truth) in seen:
        continue
    seen.add((sol, truth))
    s = md.compute_score(sol, truth, strict_box_verify=True)
    m = md.compute_score(sol, truth)
    row = {
        "solution": sol,
        "truth": truth,
        "strict": [s["score"], bool(s["acc"]), opt(s["pred"])],
        "minerva": [m["score"], bool(m["acc"]), m["pred"]],
        "normalized": md.normalize_final_answer(truth),
        "last_boxed": md.last_boxed_only_string(sol),
    }
    print(json.dumps(row, ensure_ascii=False))
    out += 1
