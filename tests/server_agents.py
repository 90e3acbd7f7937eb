# Forced tool calls and json_schema replies against a running `moerun server` (run by
# tests/cli_server_schema.sh; `make test-agents` runs it with 100 of each per model). Every request
# samples at temperature 1 with its own seed. A forced call (OpenAI tool_choice "required" / a named
# function, Anthropic {"type": "any"} / {"type": "tool"}; streamed now and then) must come back as
# exactly one call of an allowed function whose arguments are valid against its schema; a
# json_schema reply that ends by itself must be valid against its schema. Validity is checked here,
# by a validator of the JSON Schema subset written apart from the server's (Python's json reader,
# every number finite). A reply cut by max_tokens counts as not passed.
# usage: server_agents.py URL N [TAG]; prints "ok NAME" / "FAIL NAME: why" and "# ..." counts.
import json, math, sys, urllib.request

URL, N = sys.argv[1], int(sys.argv[2])
TAG = sys.argv[3] if len(sys.argv) > 3 else "server"


def post(path, body):
    req = urllib.request.Request(URL + path, json.dumps(body).encode(), {"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=300) as r:
        data = r.read().decode("utf-8", "replace")
    if body.get("stream"):
        return [json.loads(l[6:]) for l in data.split("\n") if l.startswith("data: {")]
    return json.loads(data)


def finite(v):
    if isinstance(v, float): return math.isfinite(v)
    if isinstance(v, list): return all(finite(x) for x in v)
    if isinstance(v, dict): return all(finite(x) for x in v.values())
    return True


def is_type(v, t):
    if t == "string": return isinstance(v, str)
    if t == "boolean": return isinstance(v, bool)
    if t == "null": return v is None
    if t == "object": return isinstance(v, dict)
    if t == "array": return isinstance(v, list)
    num = isinstance(v, (int, float)) and not isinstance(v, bool)
    if t == "number": return num
    if t == "integer": return num and float(v).is_integer()
    raise ValueError("type " + t)


def valid(root, s, v):
    """JSON Schema's meaning of the subset (additionalProperties absent: any member)"""
    if s is True or s == {}: return True
    if "$ref" in s:
        ref = s["$ref"]
        return valid(root, root if ref == "#" else root[ref.split("/")[1]][ref.split("/")[2]], v)
    if "anyOf" in s: return any(valid(root, a, v) for a in s["anyOf"])
    if "const" in s and not (v == s["const"] and type(v) == type(s["const"])): return False
    if "enum" in s and not any(v == e and type(v) == type(e) for e in s["enum"]): return False
    if "type" in s:
        ts = s["type"] if isinstance(s["type"], list) else [s["type"]]
        if not any(is_type(v, t) for t in ts): return False
    if isinstance(v, dict):
        props, add = s.get("properties", {}), s.get("additionalProperties", True)
        if any(r not in v for r in s.get("required", [])): return False
        for k, x in v.items():
            if k in props:
                if not valid(root, props[k], x): return False
            elif add is False or (isinstance(add, dict) and not valid(root, add, x)): return False
    if isinstance(v, list):
        if "items" in s and not all(valid(root, s["items"], x) for x in v): return False
        if len(v) < s.get("minItems", 0) or len(v) > s.get("maxItems", 1 << 30): return False
    return True


def check(schema, text):
    try:
        v = json.loads(text)
    except ValueError as e:
        return "not JSON (%s): %r" % (e, text)
    if not finite(v): return "a number beyond a double: %r" % text
    return True if valid(schema, schema, v) else "not valid: %r" % text


# functions a model that never calls tools by itself can finish (enums, numbers, booleans, short
# arrays; a free string is a small model's own business and may not end within max_tokens)
TOOLS = [
    ("get_weather", "Weather for a city", {"type": "object", "properties": {
        "city": {"enum": ["Jerusalem", "Bethlehem", "Nazareth"]}, "unit": {"enum": ["C", "F"]}, "days": {"type": "integer"}},
        "required": ["city", "unit"], "additionalProperties": False}),
    ("add", "Add two numbers", {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                                "required": ["a", "b"]}),
    ("set_flags", "Set flags", {"type": "object", "properties": {
        "on": {"type": "boolean"}, "level": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
        "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "maxItems": 3}}, "required": ["on"],
        "additionalProperties": False}),
    ("ping", "No arguments", None),
]
SCHEMAS = [
    {"type": "object", "properties": {"book": {"enum": ["Genesis", "Exodus", "Psalms", "John"]}, "chapter": {"type": "integer"},
     "verses": {"type": "array", "items": {"type": "integer"}, "maxItems": 4}, "holy": {"type": "boolean"}},
     "required": ["book", "chapter", "holy"], "additionalProperties": False},
    {"$defs": {"n": {"type": "object", "properties": {"v": {"type": "number"}, "kids": {"type": "array",
     "items": {"$ref": "#/$defs/n"}, "maxItems": 1}}, "required": ["v"], "additionalProperties": False}}, "$ref": "#/$defs/n"},
    {"anyOf": [{"type": "object", "properties": {"ok": {"const": True}, "n": {"type": "integer"}}, "required": ["ok", "n"],
                "additionalProperties": False},
               {"type": "object", "properties": {"ok": {"const": False}, "code": {"enum": [1, 2, 3]}}, "required": ["ok"],
                "additionalProperties": False}]},
    {"type": "array", "items": {"enum": [1, 2, 3, "x", None]}, "minItems": 2, "maxItems": 5},
]
MSGS = [{"role": "user", "content": "What is the weather in Jerusalem, and what is 2 + 3?"}]
failed = 0


def result(name, why):
    global failed
    if why is True: print("ok " + name)
    else:
        failed += 1
        print("FAIL %s: %s" % (name, str(why).replace("\n", " ")[:400]))


def oai_tools():
    return [{"type": "function", "function": dict({"name": n, "description": d}, **({"parameters": p} if p else {}))}
            for n, d, p in TOOLS]


def ant_tools():
    return [dict({"name": n, "description": d}, **({"input_schema": p} if p else {})) for n, d, p in TOOLS]


def forced(i):
    """request i: (api, body, allowed names); modes in turn"""
    mode, seed = i % 6, 1000 + i
    named = TOOLS[i % len(TOOLS)][0]
    base = {"messages": MSGS, "temperature": 1, "seed": seed, "max_tokens": 400}
    if mode == 0: return "chat", dict(base, tools=oai_tools(), tool_choice="required"), None
    if mode == 1: return "chat", dict(base, tools=oai_tools(), tool_choice={"type": "function", "function": {"name": named}}), named
    if mode == 2: return "chat", dict(base, tools=oai_tools(), tool_choice="required", parallel_tool_calls=False, stream=True), None
    if mode == 3: return "anthropic", dict(base, tools=ant_tools(), tool_choice={"type": "any"}), None
    if mode == 4: return "anthropic", dict(base, tools=ant_tools(), tool_choice={"type": "tool", "name": named}, stream=True), named
    return "chat", dict(base, tools=oai_tools(), tool_choice={"type": "function", "function": {"name": named}}, stream=True), named


def calls_of(api, body, r):
    """[(name, arguments text)], finish"""
    if api == "chat" and not body.get("stream"):
        c = r["choices"][0]
        return [(t["function"]["name"], t["function"]["arguments"]) for t in c["message"].get("tool_calls") or []], c["finish_reason"]
    if api == "chat":
        calls, finish = {}, None
        for ch in r:
            for c in ch.get("choices", []):
                for t in c["delta"].get("tool_calls") or []:
                    e = calls.setdefault(t["index"], ["", ""])
                    e[0] += t.get("function", {}).get("name") or ""
                    e[1] += t.get("function", {}).get("arguments") or ""
                finish = c.get("finish_reason") or finish
        return [tuple(calls[k]) for k in sorted(calls)], finish
    if not body.get("stream"):
        return [(b["name"], json.dumps(b["input"])) for b in r["content"] if b["type"] == "tool_use"], r["stop_reason"]
    blocks, finish = {}, None
    for ev in r:
        if ev["type"] == "content_block_start" and ev["content_block"]["type"] == "tool_use":
            blocks[ev["index"]] = [ev["content_block"]["name"], ""]
        elif ev["type"] == "content_block_delta" and ev["delta"]["type"] == "input_json_delta":
            blocks[ev["index"]][1] += ev["delta"]["partial_json"]
        elif ev["type"] == "message_delta":
            finish = ev["delta"]["stop_reason"]
    return [tuple(blocks[k]) for k in sorted(blocks)], finish


calls_ok = cut = 0
for i in range(N):
    api, body, named = forced(i)
    r = post("/v1/chat/completions" if api == "chat" else "/v1/messages", body)
    calls, finish = calls_of(api, body, r)
    if finish in ("length", "max_tokens"):
        cut += 1
        result("%s_forced_call_%d" % (TAG, i), "cut at max_tokens")
        continue
    if len(calls) != 1 or finish not in ("tool_calls", "tool_use"):
        result("%s_forced_call_%d" % (TAG, i), "%d calls, finish %s: %s" % (len(calls), finish, json.dumps(r)[:300]))
        continue
    name, args = calls[0]
    schema = next((p for n, d, p in TOOLS if n == name), False)
    why = True
    if schema is False or (named and name != named): why = "called %r (allowed: %s)" % (name, named or "any")
    else: why = check(schema or {"type": "object"}, args)
    calls_ok += why is True
    result("%s_forced_call_%d" % (TAG, i), why)
print("# %s: %d of %d forced calls parsed and valid (%d cut at max_tokens)" % (TAG, calls_ok, N, cut))

schema_ok = cut = 0
for i in range(N):
    schema = SCHEMAS[i % len(SCHEMAS)]
    body = {"messages": [{"role": "user", "content": "Answer in JSON."}], "temperature": 1, "seed": 2000 + i, "max_tokens": 400,
            "response_format": {"type": "json_schema", "json_schema": {"name": "answer", "strict": True, "schema": schema}}}
    r = post("/v1/chat/completions", body)
    c = r["choices"][0]
    if c["finish_reason"] == "length":
        cut += 1
        result("%s_json_schema_%d" % (TAG, i), "cut at max_tokens")
        continue
    why = check(schema, c["message"]["content"]) if c["finish_reason"] == "stop" else "finish " + c["finish_reason"]
    schema_ok += why is True
    result("%s_json_schema_%d" % (TAG, i), why)
print("# %s: %d of %d json_schema replies valid (%d cut at max_tokens)" % (TAG, schema_ok, N, cut))
sys.exit(1 if failed else 0)
