# Thinking against a running `moerun server` on tiny-deepseek4 (run by tests/cli_server_think.sh):
# the reasoning comes back apart from the answer (OpenAI reasoning_content, Anthropic thinking
# blocks), streamed deltas reassemble to the whole reply, a budget ends the reasoning early (its
# reasoning a prefix of the unbounded one), thinking off is the plain reply, history reasoning is
# rendered where the template keeps it, and bad thinking fields are 400s.
# usage: server_think.py URL; prints "ok NAME" / "FAIL NAME: why".
import json, sys, urllib.error, urllib.request

URL = sys.argv[1]
MSGS = [{"role": "user", "content": "In the beginning"}]


def post(path, body):
    req = urllib.request.Request(URL + path, json.dumps(body).encode(), {"content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=300) as r:
            code, data = r.status, r.read()
    except urllib.error.HTTPError as e:
        code, data = e.code, e.read()
    text = data.decode("utf-8", "surrogateescape")  # random-weight text: bytes kept as they are
    if body.get("stream"):
        return code, [json.loads(l[6:]) for l in text.split("\n") if l.startswith("data: {")]
    return code, json.loads(text)


def check(name, cond, why):
    print(("ok " if cond else "FAIL ") + name + ("" if cond else ": " + why))


def chat(**kw):
    body = {"messages": MSGS, "max_tokens": 40, "temperature": 0}
    body.update(kw)
    return post("/v1/chat/completions", body)


def stream_parts(chunks):
    r = "".join(c["choices"][0]["delta"].get("reasoning_content", "") for c in chunks if c.get("choices"))
    t = "".join(c["choices"][0]["delta"].get("content", "") or "" for c in chunks if c.get("choices"))
    return r, t


def main():
    on = {"chat_template_kwargs": {"thinking": True}}
    _, full = chat(**on)
    m = full["choices"][0]["message"]
    check("think_reasoning_apart", m.get("reasoning_content") and "</think>" not in m.get("content", ""), json.dumps(m)[:300])
    _, bud = chat(reasoning_budget=6, **on)
    b = bud["choices"][0]["message"]
    ok = b.get("reasoning_content") and m["reasoning_content"].startswith(b["reasoning_content"]) and \
        len(b["reasoning_content"]) < len(m["reasoning_content"]) and b.get("content")
    check("think_budget_ends_reasoning", ok, json.dumps(b)[:300])
    _, chunks = chat(reasoning_budget=6, stream=True, **on)
    r, t = stream_parts(chunks)
    check("think_stream_reassembles", (r, t) == (b["reasoning_content"], b["content"]), repr((r[:80], t[:80])))
    # reasoning_effort turns it on, "none" off; thinking off is the template's default prompt
    _, eff = chat(reasoning_effort="high", reasoning_budget=6)
    check("think_effort_on", eff["choices"][0]["message"] == b, json.dumps(eff["choices"][0]["message"])[:200])
    _, off = chat(chat_template_kwargs={"thinking": False})
    _, dflt = chat()
    _, none = chat(reasoning_effort="none")
    om = off["choices"][0]["message"]
    check("think_off_is_default", om == dflt["choices"][0]["message"] == none["choices"][0]["message"] and "reasoning_content" not in om,
          json.dumps(om)[:200])
    # history: the reasoning of the turn after the last user turn is rendered (more prompt tokens)
    hist = MSGS + [{"role": "assistant", "content": "Light.", "reasoning_content": "Genesis one, verse three."}]
    _, h1 = chat(messages=hist, max_tokens=1, **on)
    _, h0 = chat(messages=[MSGS[0], {"role": "assistant", "content": "Light."}], max_tokens=1, **on)
    _, h2 = chat(messages=hist + [{"role": "user", "content": "Again"}], max_tokens=1, **on)
    _, h3 = chat(messages=hist + [{"role": "user", "content": "Again"}], max_tokens=1, chat_template_kwargs={"thinking": True, "drop_thinking": False})
    p = [x["usage"]["prompt_tokens"] for x in (h0, h1, h2, h3)]
    check("think_history_kept_or_dropped", p[1] > p[0] and p[3] > p[2], repr(p))
    # Anthropic: a thinking block, then the text; the stream's events reassemble to it
    ab = {"messages": MSGS, "max_tokens": 40, "temperature": 0, "thinking": {"type": "enabled", "budget_tokens": 6}}
    _, am = post("/v1/messages", ab)
    blocks = am.get("content", [])
    ok = len(blocks) == 2 and blocks[0]["type"] == "thinking" and blocks[1]["type"] == "text" and \
        blocks[0]["thinking"] == b["reasoning_content"] and blocks[1]["text"] == b["content"]
    check("think_anthropic_blocks", ok, json.dumps(blocks)[:300])
    ab["stream"] = True
    _, ev = post("/v1/messages", ab)
    th = "".join(e["delta"].get("thinking", "") for e in ev if e["type"] == "content_block_delta")
    tx = "".join(e["delta"].get("text", "") for e in ev if e["type"] == "content_block_delta")
    starts = [(e["index"], e["content_block"]["type"]) for e in ev if e["type"] == "content_block_start"]
    ok = starts == [(0, "thinking"), (1, "text")] and th == blocks[0]["thinking"] and tx == blocks[1]["text"] if len(blocks) == 2 else False
    check("think_anthropic_stream", ok, repr((starts, th[:60], tx[:60])))
    _, dis = post("/v1/messages", dict(ab, stream=False, thinking={"type": "disabled"}))
    check("think_anthropic_disabled", [x["type"] for x in dis.get("content", [])] == ["text"], json.dumps(dis)[:200])
    # refusals name the field
    bad = [({"chat_template_kwargs": {"foo": 1}}, "chat_template_kwargs.foo"), ({"reasoning_effort": "huge"}, "reasoning_effort"),
           ({"chat_template_kwargs": {"thinking": "yes"}}, "thinking")]
    for kw, what in bad:
        code, e = chat(**kw)
        check("think_400_" + what.replace(".", "_"), code == 400 and what in e["error"]["message"], "%d %s" % (code, json.dumps(e)[:200]))
    code, e = post("/v1/messages", dict(ab, stream=False, thinking={"type": "enabled"}))
    check("think_400_budget_tokens", code == 400 and "budget_tokens" in e["error"]["message"], "%d %s" % (code, json.dumps(e)[:200]))


main()
