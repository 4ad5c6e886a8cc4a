#!/usr/bin/env python3
"""Render the real Qwen3 chat template exactly as transformers' apply_chat_template does, without
transformers: jinja2's ImmutableSandboxedEnvironment with trim_blocks and lstrip_blocks, the
loopcontrols extension, transformers' tojson filter (ensure_ascii=False, indent, separators,
sort_keys), raise_exception and strftime_now.

    python3 scripts/chat-fixture.py --check      # reproduces golden.json's `chat` entries byte for byte
    python3 scripts/chat-fixture.py --write      # (re)writes testdata/fixtures/formats.json

formats.json holds one conversation per trajectory format (env.format chat, retool, tool_call),
as the rollout lays it out, with what the template renders: `contexts`, the conversation cut after
the opening and after each observation, rendered with the generation prompt (what the model reads
when it generates next), and `full`, the whole conversation without it. engine/batch's layout
test compares TurnPieces with them. Needs python3 and jinja2 (3.1.x) only.
"""
import argparse
import json
import os
import sys
from datetime import datetime

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
QWEN3 = os.path.join(ROOT, "testdata", "fixtures", "qwen3-tokenizer")
OUT = os.path.join(ROOT, "testdata", "fixtures", "formats.json")


def compile_template(source):
    """The template as transformers compiles it (chat_template_utils._compile_jinja_template)."""

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):
        return datetime.now().strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env.from_string(source)


def load_template():
    with open(os.path.join(QWEN3, "tokenizer_config.json"), encoding="utf-8") as f:
        cfg = json.load(f)
    special = {k: v for k, v in cfg.items() if k.endswith("_token") and isinstance(v, str)}
    return compile_template(cfg["chat_template"]), special


def render(tpl, special, messages, tools, add_generation_prompt):
    return tpl.render(messages=messages, tools=tools, documents=None, add_generation_prompt=add_generation_prompt, **special)


def check(tpl, special):
    with open(os.path.join(QWEN3, "golden.json"), encoding="utf-8") as f:
        golden = json.load(f)
    for i, c in enumerate(golden["chat"]):
        got = render(tpl, special, c["messages"], c["tools"], c["add_generation_prompt"])
        if got != c["text"]:
            sys.exit(f"golden chat {i}: rendered text differs from transformers'\n got {got!r}\nwant {c['text']!r}")
    print(f"golden.json: {len(golden['chat'])} chat entries reproduced byte for byte")


SYSTEM_INTERPRETER = ("Solve the problem. You may run code by writing it between <code> and </code>; its output comes "
                      "back in <interpreter></interpreter>. Give the final answer as \\boxed{answer}.")
SYSTEM_TOOL_CALL = ("Solve the problem. You may run Python code by calling the python tool; its output comes back as "
                    "the tool's response. Give the final answer as \\boxed{answer}.")
# envs/retool.PythonTool
PYTHON_TOOL = json.loads('{"type": "function", "function": {"name": "python", "description": "Runs Python code and '
                         'returns what it prints (stdout), or the end of the error\'s traceback.", "parameters": '
                         '{"type": "object", "properties": {"code": {"type": "string", "description": "The Python code '
                         'to run; print the values you need."}}, "required": ["code"]}}}')
QUESTION = "What is 6 * 7? Give the product."


def conversations():
    """One conversation per format, as engine/play's episode leaves its message list."""
    return [
        {
            "format": "chat",
            "tools": None,
            "messages": [
                {"role": "system", "content": SYSTEM_INTERPRETER},
                {"role": "user", "content": QUESTION},
                {"role": "assistant", "content": "Let me compute.\n<code>\nprint(6 * 7)\n</code>"},
                {"role": "user", "content": "<interpreter>\n42\n</interpreter>"},
                {"role": "assistant", "content": "<think>\nThe tool printed 42.\n</think>\n\nThe answer is \\boxed{42}."},
            ],
        },
        {
            "format": "retool",
            "tools": None,
            "messages": [
                {"role": "system", "content": SYSTEM_INTERPRETER},
                {"role": "user", "content": QUESTION},
                {"role": "assistant", "content": (
                    "<think>\nLet me compute.\n<code>\n```python\nx = 6 * 7\nprint(x)\n```\n</code>"
                    "\n<interpreter>\n42\n</interpreter>\n"
                    "\nCheck once more.\n<code>\nprint(x == 42)\n</code>"
                    "\n<interpreter>\nTrue\n</interpreter>\n"
                    "\nSo it is 42.\n</think>\n\nAnswer: \\boxed{42}")},
            ],
        },
        {
            "format": "tool_call",
            "tools": [PYTHON_TOOL],
            "messages": [
                {"role": "system", "content": SYSTEM_TOOL_CALL},
                {"role": "user", "content": QUESTION},
                {"role": "assistant", "content": "Let me compute.", "tool_calls": [
                    {"name": "python", "arguments": "{\"code\": \"print(6 * 7)\"}"}]},
                {"role": "tool", "content": "42"},
                {"role": "assistant", "content": "", "tool_calls": [
                    {"name": "python", "arguments": "{\"code\": \"print(6 * 7 == 42)\"}"}]},
                {"role": "tool", "content": "True"},
                {"role": "assistant", "content": "<think>\nThe tool agrees.\n</think>\n\nThe answer is \\boxed{42}."},
            ],
        },
    ]


def write(tpl, special):
    out = []
    for c in conversations():
        msgs, tools = c["messages"], c["tools"]
        contexts = []
        for k in range(2, len(msgs) + 1):
            if k == 2 or msgs[k - 1]["role"] in ("user", "tool"):
                contexts.append({"messages": k, "text": render(tpl, special, msgs[:k], tools, True)})
        out.append(dict(c, contexts=contexts, full=render(tpl, special, msgs, tools, False)))
    with open(OUT, "w", encoding="utf-8") as f:
        json.dump({"made_by": "scripts/chat-fixture.py --write (jinja2 " + jinja2.__version__ + ", the template of "
                   "testdata/fixtures/qwen3-tokenizer/tokenizer_config.json rendered as transformers does)",
                   "conversations": out}, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"wrote {os.path.relpath(OUT, ROOT)}: {len(out)} conversations")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="reproduce golden.json's chat entries")
    ap.add_argument("--write", action="store_true", help="write testdata/fixtures/formats.json")
    args = ap.parse_args()
    tpl, special = load_template()
    if args.check or not args.write:
        check(tpl, special)
    if args.write:
        check(tpl, special)
        write(tpl, special)


if __name__ == "__main__":
    main()
