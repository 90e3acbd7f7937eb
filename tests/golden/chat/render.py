#!/usr/bin/env python3
"""Renders the chat goldens: every case of cases.json through its reference Jinja template
(python3 jinja2, with the environment Hugging Face transformers' apply_chat_template uses:
trim_blocks, lstrip_blocks, loop controls, sandboxed (but lists may be appended to: the Kimi-K2
templates queue their call ids), tojson = json.dumps(ensure_ascii=False) without sorting,
raise_exception; plus from_json = json.loads, which the DeepSeek-V4 template calls).

usage: render.py TEMPLATES_DIR [OUT_DIR]   (writes OUT_DIR/NAME.txt per case; OUT_DIR defaults to
this file's folder). TEMPLATES_DIR holds the reference templates named in cases.json ("jinja")."""
import json
import os
import sys

import jinja2
from jinja2.sandbox import SandboxedEnvironment


def raise_exception(msg):
    raise jinja2.exceptions.TemplateError(msg)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def env():
    e = SandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    e.filters["tojson"] = tojson
    e.filters["from_json"] = json.loads
    e.globals["raise_exception"] = raise_exception
    return e


def main():
    tdir = sys.argv[1]
    here = os.path.dirname(os.path.abspath(__file__))
    out = sys.argv[2] if len(sys.argv) > 2 else here
    cases = json.load(open(os.path.join(here, "cases.json"), encoding="utf-8"))
    e = env()
    for c in cases:
        src = open(os.path.join(tdir, c["jinja"]), encoding="utf-8").read()
        kw = dict(c.get("kwargs", {}))
        kw["messages"] = c["messages"]
        if c.get("tools"):
            kw["tools"] = [{"type": "function", "function": f} for f in c["tools"]]
        kw["add_generation_prompt"] = c.get("add_generation_prompt", True)
        kw["bos_token"] = ""  # moerun's tokenizer adds BOS; the templates' text starts after it
        kw["eos_token"] = c.get("eos_token", "")
        date = c.get("date", "2026-01-01")  # strftime_now: the case's date, so that the text is fixed
        e.globals["strftime_now"] = lambda fmt, d=date: d
        text = e.from_string(src).render(**kw)
        with open(os.path.join(out, c["name"] + ".txt"), "w", encoding="utf-8", newline="") as f:
            f.write(text)
        print(c["name"], len(text.encode("utf-8")), "bytes")


if __name__ == "__main__":
    main()
