#!/bin/sh
# moerun server: request parameters beyond the basics. Speculative decoding (--spec, "speculative.n_max")
# gives the same greedy text as plain decoding, whole and streamed, alone and in batched steps of
# several slots; logit_bias bans and forces tokens; presence / frequency penalties apply;
# response_format json_object gives JSON objects; bad values are 400 errors naming the field.
. tests/lib.sh
K=$SHARED/models/kjv-moe-q8_0.gguf
if ! command -v curl >/dev/null 2>&1; then fail server_params_curl "curl is not installed"; exit 1; fi
PORT=$((20000 + ($$ + 7919) % 20000))
SRV=""
trap 'if [ -n "$SRV" ]; then kill $SRV 2>/dev/null; fi; rm -rf "$TMPD"' EXIT
start() { # start PORT ARGS...: a server on kjv-moe, waits until it answers
  p=$1; shift
  "$MOERUN" server -m "$K" --port "$p" -t 1 "$@" >/dev/null 2>>"${SRVLOG:-$TMPD/srv$p.err}" &
  SRV=$!
  for i in $(seq 1 100); do curl -s "http://127.0.0.1:$p/health" 2>/dev/null | grep -q '"ok"' && return 0; sleep 0.1; done
  fail "server_start_$p" "$(head -c 300 "$TMPD/srv$p.err")"; exit 1
}
stop() { kill $SRV 2>/dev/null; wait $SRV 2>/dev/null; SRV=""; }
post() { curl -s -o "$TMPD/body" -w '%{http_code}' "http://127.0.0.1:$PORT$1" -d "$2"; }
text() { sed 's/.*"text":\("\([^"\\]\|\\.\)*"\).*/\1/' "$1"; }
num() { sed -n "s/.*\"$1\":\([0-9]*\).*/\1/p" "$2"; }

# a prompt that quotes itself, so prompt lookup finds drafts
Q="And God said, Let there be light: and there was light. And God saw the light, that it was good. And God said, Let there be"
"$MOERUN" run -m "$K" -p "$Q" --temp 0 -n 48 -t 1 --no-display-prompt >"$TMPD/run.txt" 2>/dev/null
B="{\"prompt\":\"$Q\",\"max_tokens\":48,\"temperature\":0"

start $PORT --spec
code=$(post /v1/completions "$B}")
text "$TMPD/body" >"$TMPD/spec.json"
got=$(sed 's/^"//; s/"$//' "$TMPD/spec.json")
drafted=$(num draft_n "$TMPD/body")
if [ "$code" = 200 ] && [ "$got" = "$(cat "$TMPD/run.txt")" ] && [ "${drafted:-0}" -gt 0 ]; then ok server_spec_greedy_same
else fail server_spec_greedy_same "code $code drafts '$drafted' got '$got' want '$(cat "$TMPD/run.txt")'"; fi
curl -s "http://127.0.0.1:$PORT/v1/completions" -d "$B,\"stream\":true}" >"$TMPD/sse"
streamed=$(sed -n 's/^data: .*"text":"\(\([^"\\]\|\\.\)*\)".*/\1/p' "$TMPD/sse" | tr -d '\n')
if [ "$streamed" = "$got" ] && tail -n 2 "$TMPD/sse" | grep -q '^data: \[DONE\]'; then ok server_spec_stream_same
else fail server_spec_stream_same "streamed '$streamed' want '$got'"; fi
code=$(post /v1/completions "$B,\"speculative.n_max\":0}")
if [ "$code" = 200 ] && [ "$(text "$TMPD/body")" = "$(cat "$TMPD/spec.json")" ] && [ "$(num draft_n "$TMPD/body")" = 0 ]; then
  ok server_spec_request_off; else fail server_spec_request_off "code $code $(head -c 300 "$TMPD/body")"; fi
code=$(post /v1/completions "$B,\"speculative.n_max\":65}")
if [ "$code" = 400 ] && grep -q 'speculative.n_max' "$TMPD/body"; then ok server_spec_bad_n_max; else fail server_spec_bad_n_max "code $code"; fi
code=$(post /v1/completions "$B,\"speculative.n_max\":2,\"speculative.n_min\":3}")
if [ "$code" = 400 ] && grep -q 'speculative.n_min' "$TMPD/body"; then ok server_spec_bad_n_min; else fail server_spec_bad_n_min "code $code"; fi
if curl -s "http://127.0.0.1:$PORT/props" | grep -q '"speculative.n_max":8'; then ok server_spec_props; else fail server_spec_props "no speculative.n_max 8 in /props"; fi
stop

# without --spec a request asks for it
start $PORT
code=$(post /v1/completions "$B,\"speculative.n_max\":4,\"speculative.n_min\":1,\"speculative.p_min\":0.5}")
if [ "$code" = 200 ] && [ "$(text "$TMPD/body")" = "$(cat "$TMPD/spec.json")" ] && [ "$(num draft_n "$TMPD/body")" -gt 0 ]; then
  ok server_spec_per_request; else fail server_spec_per_request "code $code $(head -c 300 "$TMPD/body")"; fi
code=$(post /v1/completions "$B}")
if [ "$code" = 200 ] && [ "$(num draft_n "$TMPD/body")" = 0 ]; then ok server_spec_default_off; else fail server_spec_default_off "code $code"; fi

# logit_bias end to end (tokens seen through completions' logprobs pieces): greedy with +100 on a
# token picks it every time; -100 on the token the plain reply uses most keeps it out of the reply
U="http://127.0.0.1:$PORT" python3 - <<'PY' && ok server_logit_bias || fail server_logit_bias "see above"
import json, os, sys, urllib.request
U = os.environ["U"]
def post(path, body):
    req = urllib.request.Request(U + path, json.dumps(body).encode())
    try:
        with urllib.request.urlopen(req) as r: return r.status, json.load(r)
    except urllib.error.HTTPError as e: return e.code, json.load(e)
def pieces(extra):
    code, b = post("/v1/completions", dict(prompt="And God said", max_tokens=48, temperature=0, logprobs=0, **extra))
    assert code == 200, (code, b)
    return b["choices"][0]["logprobs"]["tokens"]
_, t = post("/tokenize", {"content": " God", "add_special": False, "with_pieces": True})
god = t["tokens"][0]["id"]
code, b = post("/v1/completions", dict(prompt="In the beginning", max_tokens=6, temperature=0, logprobs=0, logit_bias={str(god): 100}))
forced = b["choices"][0]["logprobs"]["tokens"]
if forced != [t["tokens"][0]["piece"]] * 6: sys.exit("+100 on %d gave %r" % (god, forced))
plain = pieces({})
top = max(set(plain), key=plain.count)
_, t = post("/tokenize", {"content": "".join(plain), "add_special": False, "with_pieces": True})
ids = [x["id"] for x in t["tokens"] if x["piece"] == top]
if not ids or plain.count(top) < 2: sys.exit("no token id for %r in %r" % (top, plain))
ban = ids[0]
banned = pieces({"logit_bias": {str(ban): -100}})
banned2 = pieces({"logit_bias": [[ban, False]]})
if top in banned or banned != banned2 or banned == plain:
    sys.exit("ban of %d %r: %r / %r (plain %r)" % (ban, top, banned, banned2, plain))
print("# logit_bias: banned %r (%d times in the plain reply)" % (top, plain.count(top)))
PY

# response_format json_object: replies that end by themselves parse as a JSON object (Python's
# json, not the recogniser that constrained them); a JSON schema is refused
U="http://127.0.0.1:$PORT" python3 - <<'PY' && ok server_json_object || fail server_json_object "see above"
import json, os, sys, urllib.request
U = os.environ["U"]
done = 0
for seed in range(1, 9):
    body = {"messages": [{"role": "user", "content": "Give JSON"}], "response_format": {"type": "json_object"},
            "max_tokens": 80, "temperature": 1, "seed": seed}
    with urllib.request.urlopen(urllib.request.Request(U + "/v1/chat/completions", json.dumps(body).encode())) as r:
        c = json.load(r)["choices"][0]
    text = c["message"]["content"]
    if c["finish_reason"] == "stop":
        if not isinstance(json.loads(text), dict): sys.exit("not an object: %r" % text)
        done += 1
    elif not text.lstrip().startswith("{"): sys.exit("%s: %r" % (c["finish_reason"], text))
if done < 2: sys.exit("only %d of 8 replies completed their object" % done)
print("# json_object: %d of 8 replies complete" % done)
PY
code=$(post /v1/chat/completions '{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{}}}')
if [ "$code" = 400 ] && grep -q 'response_format' "$TMPD/body"; then ok server_json_schema_400; else fail server_json_schema_400 "code $code"; fi

# presence / frequency penalties work (and change a repetitive greedy reply); bad values are 400
code=$(post /v1/completions '{"prompt":"And God said","max_tokens":48,"temperature":0}'); plain=$(text "$TMPD/body")
code1=$(post /v1/completions '{"prompt":"And God said","max_tokens":48,"temperature":0,"presence_penalty":1.5,"frequency_penalty":0.5}')
pen=$(text "$TMPD/body")
if [ "$code1" = 200 ] && [ "$pen" != "$plain" ]; then ok server_penalties; else fail server_penalties "code $code1 '$pen' == '$plain'"; fi
i=0
for bad in '"presence_penalty":3' '"frequency_penalty":"1"' '"logit_bias":{"x":1}' '"logit_bias":{"1":"a"}' \
           '"logit_bias":{"5":1,"05":2}' '"logit_bias":{"999999":1}' '"logit_bias":[[1]]' '"repeat_last_n":-2'; do
  code=$(post /v1/completions "{\"prompt\":\"x\",\"max_tokens\":1,$bad}")
  field=$(echo "$bad" | sed 's/^"\([a-z_]*\)".*/\1/'); i=$((i + 1))
  if [ "$code" = 400 ] && grep -q "$field" "$TMPD/body"; then ok "server_bad_${field}_$i"; else fail "server_bad_${field}_$i" "$bad: code $code $(head -c 200 "$TMPD/body")"; fi
done
stop

# --parallel 4 --spec: drafts are verified inside the batched steps; four concurrent greedy requests
# (two quoting, two not) equal their solo runs
start $PORT --parallel 4 --spec
P1="$Q"; P2="In the beginning God created the heaven and the earth. And the earth was without form. In the beginning God"
P3="The LORD is my shepherd"; P4="Blessed are the"
gen() { curl -s "http://127.0.0.1:$PORT/v1/completions" -d "{\"prompt\":\"$1\",\"max_tokens\":64,\"temperature\":0}"; }
gen "$P1" >"$TMPD/solo1"; gen "$P2" >"$TMPD/solo2"; gen "$P3" >"$TMPD/solo3"; gen "$P4" >"$TMPD/solo4"
gen "$P1" >"$TMPD/par1" & a=$!; gen "$P2" >"$TMPD/par2" & b=$!; gen "$P3" >"$TMPD/par3" & c=$!; gen "$P4" >"$TMPD/par4" & d=$!
wait $a $b $c $d
same=0; drafts=0
for i in 1 2 3 4; do
  [ -s "$TMPD/solo$i" ] && [ "$(text "$TMPD/par$i")" = "$(text "$TMPD/solo$i")" ] && same=$((same + 1))
  drafts=$((drafts + $(num draft_n "$TMPD/par$i")))
done
steps=$(curl -s "http://127.0.0.1:$PORT/metrics" | sed -n 's/^moerun_decode_steps_total //p')
# the solo quoting run is the plain (non-speculative) text of `moerun run`
"$MOERUN" run -m "$K" -p "$Q" --temp 0 -n 64 -t 1 --no-display-prompt >"$TMPD/run64.txt" 2>/dev/null
[ "$(text "$TMPD/solo1" | sed 's/^"//; s/"$//')" = "$(cat "$TMPD/run64.txt")" ] || same=0
if [ $same = 4 ] && [ $drafts -gt 0 ] && [ "${steps:-0}" -gt 0 ]; then ok server_spec_parallel_same_as_solo
else fail server_spec_parallel_same_as_solo "$same of 4 equal, $drafts drafts, $steps steps"; fi
stop

# --spec-mtp: drafts from a deepseek4 file's own MTP block (synthesized: random weights, none accepted),
# verified in the server's steps: the same greedy text as without drafts
"$MOERUN" synth --shape deepseek-v4-tiny-di64 --mix f32 --seed 2 --layout mtp -o "$TMPD/mtp.gguf" >/dev/null 2>&1
KK=$K; K=$TMPD/mtp.gguf
M='{"prompt":"And God said","max_tokens":24,"temperature":0}'
start $PORT --chat-template chatml
code=$(post /v1/completions "$M"); text "$TMPD/body" >"$TMPD/mtp_plain"
stop
start $PORT --chat-template chatml --spec-mtp --draft-max 4
code2=$(post /v1/completions "$M")
if [ "$code" = 200 ] && [ "$code2" = 200 ] && [ "$(text "$TMPD/body")" = "$(cat "$TMPD/mtp_plain")" ] && [ "$(num draft_n "$TMPD/body")" -gt 0 ]; then
  ok server_spec_mtp_same; else fail server_spec_mtp_same "codes $code $code2 $(head -c 300 "$TMPD/body")"; fi
stop
K=$KK
if "$MOERUN" server -m "$K" --port $PORT -t 1 --spec-mtp >/dev/null 2>"$TMPD/nomtp.err"; then fail server_spec_mtp_without_block "started"
elif grep -q "MTP block" "$TMPD/nomtp.err"; then ok server_spec_mtp_without_block; else fail server_spec_mtp_without_block "$(head -c 300 "$TMPD/nomtp.err")"; fi
