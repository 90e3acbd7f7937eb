# The OpenAI Responses API (/v1/responses) against a running `moerun server` (run by
# tests/cli_server_responses.sh): replies whole and streamed with the same seed (the typed events,
# their sequence numbers and order, reassembled to the whole reply), forced function calls, the round
# trip function_call -> function_call_output -> answer through previous_response_id (equal to sending
# the whole history as input items, and served from the prompt cache), instructions (the same prompt
# as a chat completion's system message), text.format json_schema, store false, and the refusals.
# usage: server_responses.py URL [TAG [nocut] [think]]; prints "ok NAME" / "FAIL NAME: why". nocut: the
# model's session cannot be cut back (deepseek4), so a history whose call was sampled in other tokens
# than it tokenizes to is not served from the cache (as in chat completions): that check is left out.
# think: the template renders a thinking mode (deepseek4): reasoning items, returned and replayed.
import json, sys, urllib.error, urllib.request

URL = sys.argv[1]
TAG = sys.argv[2] if len(sys.argv) > 2 else "server"
CUT = "nocut" not in sys.argv[3:]
THINK = "think" in sys.argv[3:]


def post(path, body):
    """(status, body as JSON, or the stream's events as (name, data) pairs). Bytes that are not UTF-8
    (a tiny model writes them) survive a round trip: read and sent back with surrogateescape."""
    data = json.dumps(body, ensure_ascii=False).encode("utf-8", "surrogateescape")
    req = urllib.request.Request(URL + path, data, {"content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=300) as r:
            data, status = r.read().decode("utf-8", "surrogateescape"), r.status
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read().decode("utf-8", "surrogateescape"))
    if not body.get("stream"):
        return status, json.loads(data)
    events, name = [], None
    for line in data.split("\n"):
        if line.startswith("event: "): name = line[7:]
        elif line.startswith("data: "): events.append((name, json.loads(line[6:])))
    return status, events


def check(name, cond, why):
    print(("ok %s_%s" % (TAG, name)) if cond else ("FAIL %s_%s: %s" % (TAG, name, str(why)[:400])))
    return cond


def strip(out):
    """output items without their ids (they name the response)"""
    return [{k: v for k, v in it.items() if k not in ("id", "call_id")} for it in out]


def stream_check(body):
    """streams body; returns (final response, reassembled output, problem or None)"""
    st, ev = post("/v1/responses", dict(body, stream=True))
    if st != 200: return None, None, "status %d %s" % (st, ev)
    if any(n != d.get("type") for n, d in ev): return None, None, "event name differs from its type"
    seq = [d.get("sequence_number") for _, d in ev]
    if seq != list(range(len(ev))): return None, None, "sequence numbers %s" % seq
    types = [n for n, _ in ev]
    if types[:2] != ["response.created", "response.in_progress"] or types[-1] not in ("response.completed", "response.incomplete"):
        return None, None, "order %s" % types
    out, text, args = [], {}, {}
    for n, d in ev[2:-1]:
        i = d.get("output_index")
        if n == "response.output_item.added":
            if i != len(out): return None, None, "item %s added at %d" % (i, len(out))
            out.append(d["item"])
        elif n == "response.content_part.added": text[i] = ""
        elif n in ("response.output_text.delta", "response.reasoning_text.delta"): text[i] += d["delta"]
        elif n in ("response.output_text.done", "response.reasoning_text.done"):
            if d["text"] != text[i]: return None, None, "text.done %r != deltas %r" % (d["text"], text[i])
        elif n == "response.function_call_arguments.delta": args[i] = args.get(i, "") + d["delta"]
        elif n == "response.function_call_arguments.done":
            if d["arguments"] != args[i]: return None, None, "arguments.done differs from the deltas"
        elif n == "response.output_item.done":
            it = d["item"]
            if it["type"] in ("message", "reasoning") and it["content"][0]["text"] != text.get(i): return None, None, "message.done differs"
            if it["type"] == "function_call" and it["arguments"] != args.get(i): return None, None, "call.done differs"
            out[i] = it
        elif n != "response.content_part.done": return None, None, "unexpected event %s" % n
    final = ev[-1][1]["response"]
    if final["output"] != out: return None, None, "response.completed output %s != items %s" % (final["output"], out)
    return final, out, None


def same_stream(name, body):
    """the streamed reply reassembles to the whole one (same seed)"""
    st, whole = post("/v1/responses", body)
    if not check(name + "_whole", st == 200 and whole.get("object") == "response", (st, whole)): return None
    final, out, bad = stream_check(body)
    check(name + "_stream", not bad and strip(out) == strip(whole["output"]) and final["status"] == whole["status"]
          and final["usage"]["output_tokens"] == whole["usage"]["output_tokens"], bad or (out, whole["output"]))
    return whole


TOOLS = [{"type": "function", "name": "get_weather", "description": "Weather in a city",
          "parameters": {"type": "object", "properties": {"city": {"enum": ["Zion", "Jerusalem"]}, "days": {"type": "integer"}},
                         "required": ["city"], "additionalProperties": False}}]

# plain text, cut by max_output_tokens
r = same_stream("text", {"input": "Who made the heaven?", "max_output_tokens": 12, "temperature": 1, "seed": 5})
if r:
    check("text_incomplete", r["status"] == "incomplete" and r["incomplete_details"] == {"reason": "max_output_tokens"}
          and r["usage"]["output_tokens"] == 12 and r["output"][0]["type"] == "message", r)

# instructions are the system message: the same prompt and greedy text as a chat completion
st, a = post("/v1/responses", {"instructions": "You are terse.", "input": [{"role": "user", "content": [{"type": "input_text", "text": "Who?"}]}],
                               "max_output_tokens": 8, "temperature": 0})
st2, b = post("/v1/chat/completions", {"messages": [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Who?"}],
                                       "max_tokens": 8, "temperature": 0})
check("instructions_as_chat", st == 200 and st2 == 200 and a["usage"]["input_tokens"] == b["usage"]["prompt_tokens"]
      and a["output"][0]["content"][0]["text"] == b["choices"][0]["message"]["content"], (a, b))

# a forced call, then its output through previous_response_id, then the answer
call = same_stream("forced_call", {"input": "What is the weather in Zion?", "tools": TOOLS, "tool_choice": "required",
                                   "temperature": 1, "seed": 7, "max_output_tokens": 300})
if call:
    out = call["output"]
    ok = call["status"] == "completed" and len(out) == 1 and out[0]["type"] == "function_call" and out[0]["name"] == "get_weather"
    args = json.loads(out[0]["arguments"]) if ok else {}
    check("forced_call_valid", ok and args.get("city") in ("Zion", "Jerusalem") and set(args) <= {"city", "days"}, out)
    follow = {"previous_response_id": call["id"], "tools": TOOLS, "max_output_tokens": 16, "temperature": 1, "seed": 9,
              "input": [{"type": "function_call_output", "call_id": out[0]["call_id"], "output": "Sunny, 30 degrees."}]}
    a2 = same_stream("round_trip", follow)
    if a2:
        check("round_trip_answer", a2["previous_response_id"] == call["id"] and a2["output"][-1]["type"] in ("message", "function_call"), a2)
        if CUT: check("round_trip_cached", a2["usage"]["input_tokens_details"]["cached_tokens"] >= call["usage"]["input_tokens"],
              (a2["usage"], call["usage"]))
        # the stored conversation is the history sent in full
        hist = [{"role": "user", "content": "What is the weather in Zion?"}] + out + follow["input"]
        st, a3 = post("/v1/responses", dict(follow, previous_response_id=None, input=hist))
        check("round_trip_as_items", st == 200 and a3["usage"]["input_tokens"] == a2["usage"]["input_tokens"]
              and strip(a3["output"]) == strip(a2["output"]), (a3, a2))
        st, a4 = post("/v1/responses", {"previous_response_id": a2["id"], "tools": TOOLS, "input": "And tomorrow?", "max_output_tokens": 4})
        check("chained_twice", st == 200 and a4["usage"]["input_tokens"] > a2["usage"]["input_tokens"], a4)

# a named function, streamed
r = same_stream("named_call", {"input": "Weather?", "tools": TOOLS, "tool_choice": {"type": "function", "name": "get_weather"},
                               "temperature": 1, "seed": 21, "max_output_tokens": 300})
if r: check("named_call_valid", [o["type"] for o in r["output"]] == ["function_call"], r["output"])

# text.format json_schema
SCHEMA = {"type": "object", "properties": {"book": {"enum": ["Genesis", "John"]}, "chapter": {"type": "integer"}},
          "required": ["book", "chapter"], "additionalProperties": False}
r = same_stream("json_schema", {"input": "A verse?", "temperature": 1, "seed": 13, "max_output_tokens": 300,
                                "text": {"format": {"type": "json_schema", "name": "verse", "strict": True, "schema": SCHEMA}}})
if r:
    try: v = json.loads(r["output"][0]["content"][0]["text"])
    except (ValueError, KeyError, IndexError): v = None
    check("json_schema_valid", isinstance(v, dict) and v.get("book") in ("Genesis", "John") and isinstance(v.get("chapter"), int)
          and not isinstance(v.get("chapter"), bool) and len(v) == 2 and r["text"]["format"]["name"] == "verse", r["output"])

# store false: not kept; unknown ids are a 404 in OpenAI's error shape
st, r = post("/v1/responses", {"input": "Hi", "store": False, "max_output_tokens": 2})
st2, e = post("/v1/responses", {"input": "Hi", "previous_response_id": r.get("id", "x")})
check("store_false", st == 200 and r["store"] is False and st2 == 404, (st, st2, e))
st, e = post("/v1/responses", {"input": "Hi", "previous_response_id": "resp_nope"})
check("unknown_id_404", st == 404 and "resp_nope" in e["error"]["message"] and e["error"]["type"] == "invalid_request_error", (st, e))

# refusals name the field
for name, body, want in [
        ("no_input", {"max_output_tokens": 2}, "'input' is required"),
        ("bad_tool_type", {"input": "x", "tools": [{"type": "web_search"}]}, "tools[0].type"),
        ("bad_item", {"input": [{"type": "item_reference", "id": "x"}]}, "items of type 'item_reference'"),
        ("background", {"input": "x", "background": True}, "'background'"),
        ("bad_effort", {"input": "x", "reasoning": {"effort": "extreme"}}, "reasoning.effort"),
        ("bad_schema", {"input": "x", "text": {"format": {"type": "json_schema", "name": "a", "schema": {"type": "string", "pattern": "x"}}}},
         "keyword 'pattern'"),
        ("bad_max", {"input": "x", "max_output_tokens": "5"}, "max_output_tokens")]:
    st, e = post("/v1/responses", body)
    check("refuse_" + name, st == 400 and want in e.get("error", {}).get("message", ""), (st, e))

if THINK:
    # reasoning.effort turns thinking on: a reasoning item before the message (the budget ends it)
    body = {"input": "Who made the heaven?", "reasoning": {"effort": "high"}, "reasoning_budget": 6, "max_output_tokens": 20,
            "temperature": 1, "seed": 3}
    r = same_stream("reasoning", body)
    if r:
        types = [o["type"] for o in r["output"]]
        check("reasoning_item", types[:1] == ["reasoning"] and r["output"][0]["content"][0]["text"] and r["reasoning"]["effort"] == "high"
              and "</think>" not in json.dumps(r["output"]), r["output"])
        st, off = post("/v1/responses", dict(body, reasoning={"effort": "none"}))
        check("reasoning_none", st == 200 and all(o["type"] != "reasoning" for o in off["output"]), off)
        # replayed: through previous_response_id as the same items sent in full; with the history's
        # reasoning kept (drop_thinking false) the prompt is longer than without the reasoning item
        nxt = {"reasoning": {"effort": "high"}, "reasoning_budget": 6, "max_output_tokens": 4, "temperature": 0}
        st, a = post("/v1/responses", dict(nxt, previous_response_id=r["id"], input="Again"))
        hist = [{"role": "user", "content": "Who made the heaven?"}] + r["output"] + [{"role": "user", "content": "Again"}]
        st2, b = post("/v1/responses", dict(nxt, input=hist))
        check("reasoning_replay_as_items", st == st2 == 200 and a["usage"]["input_tokens"] == b["usage"]["input_tokens"], (a, b))
        keep = dict(nxt, chat_template_kwargs={"drop_thinking": False})
        st, k1 = post("/v1/responses", dict(keep, input=hist))
        st2, k0 = post("/v1/responses", dict(keep, input=[h for h in hist if h.get("type") != "reasoning"]))
        check("reasoning_replay_kept", st == st2 == 200 and k1["usage"]["input_tokens"] > k0["usage"]["input_tokens"], (k1, k0))
