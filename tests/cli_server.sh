#!/bin/sh
# moerun server: OpenAI-style endpoints on a real model; greedy text equals `moerun run`; the prompt
# cache re-uses a shared prefix without changing results; bad requests get 4xx JSON errors.
. tests/lib.sh
K=$SHARED/models/kjv-moe-q8_0.gguf
if ! command -v curl >/dev/null 2>&1; then fail server_curl "curl is not installed"; exit 1; fi
PORT=$((20000 + $$ % 20000))
"$MOERUN" server -m "$K" --port $PORT -t 1 >"$TMPD/srv.out" 2>"$TMPD/srv.err" &
SRV=$!
trap 'kill $SRV 2>/dev/null; rm -rf "$TMPD"' EXIT
up=0
for i in $(seq 1 100); do
  if curl -s "http://127.0.0.1:$PORT/health" 2>/dev/null | grep -q '"ok"'; then up=1; break; fi
  sleep 0.1
done
if [ $up -eq 1 ]; then ok server_health; else fail server_health "server did not start: $(head -c 300 "$TMPD/srv.err")"; exit 1; fi
post() { curl -s -o "$TMPD/body" -w '%{http_code}' "http://127.0.0.1:$PORT$1" -d "$2"; }

"$MOERUN" run -m "$K" -p "And God said" --temp 0 -n 24 -t 1 >"$TMPD/run.txt" 2>/dev/null
want=$(cat "$TMPD/run.txt")
code=$(post /v1/completions '{"prompt":"And God said","max_tokens":24,"temperature":0}')
got=$(sed -n 's/.*"text":"\([^"]*\)".*/\1/p' "$TMPD/body")
if [ "$code" = 200 ] && [ "And God said$got" = "$want" ]; then ok server_completion_greedy
else fail server_completion_greedy "code $code got 'And God said$got' want '$want'"; fi
if grep -q '"completion_tokens":24' "$TMPD/body" && grep -q '"prompt_tokens":4' "$TMPD/body"; then ok server_usage
else fail server_usage "$(head -c 300 "$TMPD/body")"; fi

# the same prompt again: 3 of 4 prompt tokens come from the cache, same text
code=$(post /v1/completions '{"prompt":"And God said","max_tokens":24,"temperature":0}')
got2=$(sed -n 's/.*"text":"\([^"]*\)".*/\1/p' "$TMPD/body")
if [ "$code" = 200 ] && [ "$got2" = "$got" ] && grep -q '"cached_tokens":3' "$TMPD/body"; then ok server_prompt_cache
else fail server_prompt_cache "code $code text '$got2' body $(head -c 300 "$TMPD/body")"; fi

# streaming: the deltas concatenate to the same text and the stream ends with [DONE]
curl -s "http://127.0.0.1:$PORT/v1/completions" -d '{"prompt":"And God said","max_tokens":24,"temperature":0,"stream":true}' >"$TMPD/sse"
streamed=$(sed -n 's/^data: .*"text":"\([^"]*\)".*/\1/p' "$TMPD/sse" | tr -d '\n')
if [ "$streamed" = "$got" ] && tail -n 2 "$TMPD/sse" | grep -q '^data: \[DONE\]'; then ok server_stream
else fail server_stream "streamed '$streamed' want '$got'"; fi

# stop string cuts the text before it
code=$(post /v1/completions '{"prompt":"And God said","max_tokens":24,"temperature":0,"stop":[","]}')
if [ "$code" = 200 ] && grep -q '"finish_reason":"stop"' "$TMPD/body" && ! sed -n 's/.*"text":"\([^"]*\)".*/\1/p' "$TMPD/body" | grep -q ','; then
  ok server_stop_string; else fail server_stop_string "$(head -c 300 "$TMPD/body")"; fi

code=$(post /v1/chat/completions '{"messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Who made the heaven?"}],"max_tokens":8,"temperature":0}')
if [ "$code" = 200 ] && grep -q '"role":"assistant","content":"' "$TMPD/body" && grep -q '"completion_tokens":8' "$TMPD/body"; then
  ok server_chat; else fail server_chat "code $code $(head -c 300 "$TMPD/body")"; fi

code=$(post /v1/completions '{"prompt":'); if [ "$code" = 400 ] && grep -q '"error"' "$TMPD/body"; then ok server_bad_json; else fail server_bad_json "code $code"; fi
code=$(post /v1/chat/completions '{"messages":[]}'); if [ "$code" = 400 ]; then ok server_no_messages; else fail server_no_messages "code $code"; fi
code=$(post /v1/chat/completions '{"messages":[{"role":"user"}]}'); if [ "$code" = 400 ]; then ok server_message_no_content; else fail server_message_no_content "code $code"; fi
code=$(post /v1/nothing '{}'); if [ "$code" = 404 ]; then ok server_404; else fail server_404 "code $code"; fi
code=$(post /v1/completions '{"prompt":"x","max_tokens":-1}'); if [ "$code" = 400 ]; then ok server_bad_max_tokens; else fail server_bad_max_tokens "code $code"; fi
code=$(post /v1/completions '{"prompt":"x","max_tokens":1e300}'); if [ "$code" = 400 ]; then ok server_huge_max_tokens; else fail server_huge_max_tokens "code $code"; fi
code=$(post /v1/completions '{"prompt":"x","max_tokens":1,"top_k":1e20}'); if [ "$code" = 400 ] && grep -q 'top_k' "$TMPD/body"; then ok server_bad_top_k; else fail server_bad_top_k "code $code"; fi
code=$(post /v1/completions '{"prompt":"x","max_tokens":1,"seed":-5}'); if [ "$code" = 400 ] && grep -q 'seed' "$TMPD/body"; then ok server_bad_seed; else fail server_bad_seed "code $code"; fi
code=$(curl -s -o "$TMPD/body" -w '%{http_code}' "http://127.0.0.1:$PORT/v1/models")
if [ "$code" = 200 ] && grep -q '"id":"kjv-moe"' "$TMPD/body"; then ok server_models; else fail server_models "$(head -c 200 "$TMPD/body")"; fi

# --- the OpenAI schema: every field works or is refused naming it ---
M='"messages":[{"role":"user","content":"Who made the heaven?"}]'
code=$(post /v1/chat/completions "{$M,\"max_tokens\":\"5\"}")
if [ "$code" = 400 ] && grep -q "max_tokens" "$TMPD/body"; then ok server_wrong_type_400; else fail server_wrong_type_400 "code $code $(head -c 200 "$TMPD/body")"; fi
code=$(post /v1/chat/completions "{$M,\"max_completion_tokens\":3}")
if [ "$code" = 200 ] && grep -q '"completion_tokens":3' "$TMPD/body"; then ok server_max_completion_tokens; else fail server_max_completion_tokens "$(head -c 300 "$TMPD/body")"; fi
code=$(post /v1/chat/completions '{"messages":[{"role":"developer","content":"Be terse."},{"role":"user","content":[{"type":"text","text":"Who made"},{"type":"text","text":"the heaven?"}]}],"max_tokens":2}')
if [ "$code" = 200 ]; then ok server_content_parts_developer; else fail server_content_parts_developer "code $code $(head -c 200 "$TMPD/body")"; fi
TOOLMSGS='"messages":[{"role":"user","content":"Which verse?"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"get_verse","arguments":"{\"book\": \"Genesis\"}"}}]},{"role":"tool","tool_call_id":"c1","content":"In the beginning"}],"tools":[{"type":"function","function":{"name":"get_verse","parameters":{"type":"object","properties":{"book":{"type":"string"}}}}}]'
code=$(post /apply-template "{$TOOLMSGS}")
if [ "$code" = 200 ] && grep -q '<tool_call>\\n{\\"name\\": \\"get_verse\\", \\"arguments\\": {\\"book\\": \\"Genesis\\"}}\\n</tool_call>' "$TMPD/body" \
   && grep -q '<tool_response>\\nIn the beginning\\n</tool_response>' "$TMPD/body"; then ok server_tool_history_rendered
else fail server_tool_history_rendered "code $code $(head -c 400 "$TMPD/body")"; fi
code=$(post /v1/completions '{"prompt":["And God said"],"max_tokens":24,"temperature":0}')
got3=$(sed -n 's/.*"text":"\([^"]*\)".*/\1/p' "$TMPD/body")
ids=$(curl -s "http://127.0.0.1:$PORT/tokenize" -d '{"content":"And God said","add_special":true}' | sed 's/.*\[\(.*\)\].*/\1/')
code2=$(post /v1/completions "{\"prompt\":[$ids],\"max_tokens\":24,\"temperature\":0}")
got4=$(sed -n 's/.*"text":"\([^"]*\)".*/\1/p' "$TMPD/body")
if [ "$code" = 200 ] && [ "$code2" = 200 ] && [ "$got3" = "$got" ] && [ "$got4" = "$got" ]; then ok server_prompt_array_and_ids
else fail server_prompt_array_and_ids "codes $code $code2 ids [$ids] '$got3' '$got4' want '$got'"; fi
det=$(curl -s "http://127.0.0.1:$PORT/detokenize" -d "{\"tokens\":[$ids]}")
if echo "$det" | grep -q 'And God said'; then ok server_detokenize; else fail server_detokenize "$det"; fi
code=$(post /v1/chat/completions "{$M,\"max_tokens\":3,\"n\":2,\"temperature\":0,\"logprobs\":true,\"top_logprobs\":2}")
if [ "$code" = 200 ] && grep -q '"index":1,"message"' "$TMPD/body" && [ "$(grep -o '"top_logprobs":\[{' "$TMPD/body" | wc -l)" = 6 ]
then ok server_n_and_logprobs; else fail server_n_and_logprobs "code $code $(head -c 300 "$TMPD/body")"; fi
code=$(post /v1/chat/completions "{$M,\"response_format\":{\"type\":\"json_schema\"}}")
if [ "$code" = 400 ] && grep -q response_format "$TMPD/body"; then ok server_response_format_refused; else fail server_response_format_refused "code $code"; fi
post /v1/chat/completions "{$M,\"max_tokens\":2}" >/dev/null; s1=$(sed -n 's/.*"seed":\([0-9]*\).*/\1/p' "$TMPD/body")
post /v1/chat/completions "{$M,\"max_tokens\":2}" >/dev/null; s2=$(sed -n 's/.*"seed":\([0-9]*\).*/\1/p' "$TMPD/body")
if [ -n "$s1" ] && [ "$s1" != "$s2" ]; then ok server_random_seed; else fail server_random_seed "seeds '$s1' '$s2'"; fi
curl -s "http://127.0.0.1:$PORT/v1/chat/completions" -d "{$M,\"max_tokens\":3,\"stream\":true,\"stream_options\":{\"include_usage\":true}}" >"$TMPD/sse"
if head -n 1 "$TMPD/sse" | grep -q '"delta":{"role":"assistant","content":""}' && grep -q '"choices":\[\],"usage":{"prompt_tokens"' "$TMPD/sse"
then ok server_stream_role_and_usage; else fail server_stream_role_and_usage "$(head -c 300 "$TMPD/sse")"; fi

# --- Anthropic Messages ---
code=$(post /v1/messages "{$M,\"max_tokens\":4,\"system\":\"Be terse.\"}")
if [ "$code" = 200 ] && grep -q '"type":"message","role":"assistant"' "$TMPD/body" && grep -q '"content":\[{"type":"text","text":' "$TMPD/body" \
   && grep -q '"stop_reason":"max_tokens"' "$TMPD/body"; then ok server_anthropic; else fail server_anthropic "code $code $(head -c 300 "$TMPD/body")"; fi
curl -s "http://127.0.0.1:$PORT/v1/messages" -d "{$M,\"max_tokens\":4,\"stream\":true}" >"$TMPD/sse"
ev=$(grep '^event:' "$TMPD/sse" | sed 's/event: //' | uniq | tr '\n' ' ')
if [ "$ev" = "message_start ping content_block_start content_block_delta content_block_stop message_delta message_stop " ]
then ok server_anthropic_stream; else fail server_anthropic_stream "events: $ev"; fi

# --- metrics and introspection ---
m=$(curl -s "http://127.0.0.1:$PORT/metrics")
if echo "$m" | grep -q '^moerun_requests_total [1-9]' && echo "$m" | grep -q '^moerun_generated_tokens_total [1-9]'; then ok server_metrics
else fail server_metrics "$(echo "$m" | head -5)"; fi
if curl -s "http://127.0.0.1:$PORT/props" | grep -q '"chat_template":"chatml"' && curl -s "http://127.0.0.1:$PORT/slots" | grep -q '"n_cached_tokens":'
then ok server_props_slots; else fail server_props_slots "props/slots"; fi

# --- connections (each has its own thread) ---
# 16 sockets that send nothing and one that sends a byte a second must not hold up anyone else: before
# they were served one at a time and /health waited 30 s (the bound below is a wait, not a timing)
IDLE=""
mkfifo "$TMPD/idle"
for i in $(seq 1 16); do curl -s telnet://127.0.0.1:$PORT <"$TMPD/idle" >/dev/null 2>&1 & IDLE="$IDLE $!"; done
exec 3>"$TMPD/idle" # the idle clients' stdin: open, never written
(for i in $(seq 1 30); do printf 'P'; sleep 1; done) 2>/dev/null | curl -s telnet://127.0.0.1:$PORT >/dev/null 2>&1 & IDLE="$IDLE $!"
sleep 0.5
code=$(curl -s --max-time 10 -o "$TMPD/body" -w '%{http_code}' "http://127.0.0.1:$PORT/v1/completions" -d '{"prompt":"And God said","max_tokens":4,"temperature":0}')
h=$(curl -s --max-time 10 "http://127.0.0.1:$PORT/health")
if [ "$code" = 200 ] && [ "$h" = '{"status":"ok"}' ]; then ok server_idle_sockets_do_not_stall
else fail server_idle_sockets_do_not_stall "completion $code, health '$h'"; fi
kill $IDLE 2>/dev/null
exec 3>&-

# keep-alive: two requests (one streamed) over one connection
n=$(curl -s -o /dev/null -o /dev/null -o /dev/null -w '%{num_connects}\n' "http://127.0.0.1:$PORT/v1/models" \
    -d '{"prompt":"And God","max_tokens":3,"temperature":0,"stream":true}' "http://127.0.0.1:$PORT/v1/completions" \
    "http://127.0.0.1:$PORT/v1/models" 2>/dev/null | tr '\n' ' ')
if [ "$n" = "1 0 0 " ]; then ok server_keep_alive; else fail server_keep_alive "connects per request: $n"; fi

# Expect: 100-continue is answered before the body is sent (curl would otherwise wait 30 s here)
head -c 2000000 /dev/zero | tr '\0' 'a' | sed 's/^/{"prompt":"x","max_tokens":1,"user":"/; s/$/"}/' >"$TMPD/big.json"
code=$(curl -s -v --max-time 20 --expect100-timeout 30 -H 'Expect: 100-continue' -o "$TMPD/body" -w '%{http_code}' \
       "http://127.0.0.1:$PORT/v1/completions" --data-binary @"$TMPD/big.json" 2>"$TMPD/verbose")
if grep -q '< HTTP/1.1 100 Continue' "$TMPD/verbose" && [ "$code" != 000 ]; then ok server_expect_100
else fail server_expect_100 "code $code $(grep '^<' "$TMPD/verbose" | head -3)"; fi

# routes: query strings, trailing slashes, /chat/completions without /v1
code=$(curl -s -o "$TMPD/body" -w '%{http_code}' "http://127.0.0.1:$PORT/v1/models/?x=1")
code2=$(post /chat/completions '{"messages":[{"role":"user","content":"Hi"}],"max_tokens":2}')
if [ "$code" = 200 ] && [ "$code2" = 200 ]; then ok server_routes; else fail server_routes "models/?x=1 $code, /chat/completions $code2"; fi

# CORS preflight names the methods and echoes the requested headers
curl -s -D "$TMPD/hdr" -o /dev/null -X OPTIONS -H 'Origin: http://x' -H 'Access-Control-Request-Method: POST' \
     -H 'Access-Control-Request-Headers: authorization, x-stainless-os' "http://127.0.0.1:$PORT/v1/chat/completions"
if grep -qi '^Access-Control-Allow-Methods: .*POST' "$TMPD/hdr" && grep -qi '^Access-Control-Allow-Headers: authorization, x-stainless-os' "$TMPD/hdr"
then ok server_cors_preflight; else fail server_cors_preflight "$(tr -d '\r' <"$TMPD/hdr" | head -8)"; fi

# a second server on the same port fails before loading the model and never claims to listen
"$MOERUN" server -m "$K" --port $PORT -t 1 >"$TMPD/o2" 2>"$TMPD/e2"; rc=$?
if [ $rc = 1 ] && grep -q 'cannot listen' "$TMPD/e2" && ! grep -q 'listening' "$TMPD/e2"; then ok server_bind_fails_first
else fail server_bind_fails_first "rc $rc $(head -c 200 "$TMPD/e2")"; fi

kill $SRV; wait $SRV 2>/dev/null

# --parallel 4: four concurrent greedy requests decode in shared batched steps, each with exactly the
# text it gets alone. -b 1: one prompt token per step, so a prompt is read over many steps beside the
# others' decode tokens (-c 4096: room for a prompt long enough to be cancelled half-read)
PORT4=$((PORT + 3))
"$MOERUN" server -m "$K" --port $PORT4 -t 1 --parallel 4 -b 1 -c 4096 >/dev/null 2>"$TMPD/srv4.err" &
SRV=$!
for i in $(seq 1 100); do curl -s "http://127.0.0.1:$PORT4/health" 2>/dev/null | grep -q '"ok"' && break; sleep 0.1; done
PROMPTS="And God said|In the beginning|The LORD is my shepherd|Blessed are the"
gen() { curl -s "http://127.0.0.1:$PORT4/v1/completions" -d "{\"prompt\":\"$1\",\"max_tokens\":120,\"temperature\":0}" | sed 's/.*"text":\("\([^"\\]\|\\.\)*"\).*/\1/'; }
for i in 1 2 3 4; do gen "$(echo "$PROMPTS" | cut -d'|' -f$i)" >"$TMPD/solo$i"; done
PIDS=""
for i in 1 2 3 4; do gen "$(echo "$PROMPTS" | cut -d'|' -f$i)" >"$TMPD/par$i" & PIDS="$PIDS $!"; done
wait $PIDS
same=0
for i in 1 2 3 4; do [ -s "$TMPD/solo$i" ] && cmp -s "$TMPD/par$i" "$TMPD/solo$i" && same=$((same + 1)); done
m=$(curl -s "http://127.0.0.1:$PORT4/metrics")
steps=$(echo "$m" | sed -n 's/^moerun_decode_steps_total //p'); toks=$(echo "$m" | sed -n 's/^moerun_decode_step_tokens_total //p')
case "$(cat "$TMPD/solo1")" in "\"$got"*) ;; *) same=0;; esac # the solo run is `moerun run`'s text
if [ $same = 4 ]; then ok server_parallel_same_as_solo; else fail server_parallel_same_as_solo "$same of 4 equal to their solo runs"; fi
if [ -n "$steps" ] && [ "$toks" -gt "$steps" ]; then ok server_parallel_batched; else fail server_parallel_batched "steps $steps tokens $toks"; fi

# A long prompt arrives while three streamed requests decode: its tokens are read in the same steps
# as their decode tokens (mixed steps), and every reply, streamed, is still exactly its solo text.
# Then two long prompts at once take turns (neither waits for the other's whole prompt).
LONG=$(for i in 1 2 3 4 5 6 7 8 9; do printf 'And the earth was without form, and void; and darkness was upon the face of the deep. '; done)
LONG2=$(for i in 1 2 3 4 5 6 7 8 9; do printf 'In the beginning God created the heaven and the earth. And God saw the light. '; done)
"$MOERUN" run -m "$K" -p "$LONG" --temp 0 -n 16 -t 1 --no-display-prompt >"$TMPD/runL" 2>/dev/null
"$MOERUN" run -m "$K" -p "$LONG2" --temp 0 -n 16 -t 1 --no-display-prompt >"$TMPD/runL2" 2>/dev/null
sgen() { curl -sN "http://127.0.0.1:$PORT4/v1/completions" -d "{\"prompt\":\"$1\",\"max_tokens\":$2,\"temperature\":0,\"stream\":true}"; }
stext() { printf '"%s"' "$(sed -n 's/^data: .*"text":"\(\([^"\\]\|\\.\)*\)".*/\1/p' "$1" | tr -d '\n')"; }
mixed0=$(curl -s "http://127.0.0.1:$PORT4/metrics" | sed -n 's/^moerun_mixed_steps_total //p')
PIDS=""
# 1000 tokens each (their first 120 are the solo texts above): still decoding when the prompt arrives,
# however fast the machine
for i in 1 2 3; do sgen "$(echo "$PROMPTS" | cut -d'|' -f$i)" 1000 >"$TMPD/str$i" & PIDS="$PIDS $!"; done
for w in $(seq 1 200); do # each of the three has streamed a token
  n=0; for i in 1 2 3; do grep -q '"text"' "$TMPD/str$i" 2>/dev/null && n=$((n + 1)); done
  [ $n = 3 ] && break; sleep 0.02
done
sgen "$LONG" 16 >"$TMPD/strL"
wait $PIDS
same=0
for i in 1 2 3; do
  s=$(stext "$TMPD/str$i"); p=$(cat "$TMPD/solo$i"); p=${p%\"}
  [ ${#p} -gt 10 ] && [ "${s#"$p"}" != "$s" ] && same=$((same + 1))
done
gotL=$(stext "$TMPD/strL")
m=$(curl -s "http://127.0.0.1:$PORT4/metrics")
mixed=$(echo "$m" | sed -n 's/^moerun_mixed_steps_total //p')
if [ $same = 3 ] && [ "$gotL" = "\"$(cat "$TMPD/runL")\"" ]; then ok server_mixed_same_as_solo
else fail server_mixed_same_as_solo "$same of 3 streamed replies start with their solo texts; long prompt $gotL want \"$(cat "$TMPD/runL")\""; fi
if [ -n "$mixed" ] && [ "$mixed" -gt "$((mixed0 + 20))" ]; then ok server_mixed_steps
else fail server_mixed_steps "mixed steps $mixed0 -> $mixed: the long prompt was not read beside the decode tokens"; fi
# two long prompts of the same length at once: a step's prompt budget goes to them in turns, so both
# replies end together (one prompt after the other would end the first when about half the time has
# passed: the measure is the gap between the two ends over the time both took)
"$MOERUN" run -m "$K" -p "Then $LONG2" --temp 0 -n 8 -t 1 --no-display-prompt >"$TMPD/runA" 2>/dev/null
"$MOERUN" run -m "$K" -p "Now $LONG2" --temp 0 -n 8 -t 1 --no-display-prompt >"$TMPD/runB" 2>/dev/null
t0=$(date +%s.%N)
(sgen "Then $LONG2" 8 >"$TMPD/strA"; date +%s.%N >"$TMPD/endA") & PA=$!
(sgen "Now $LONG2" 8 >"$TMPD/strB"; date +%s.%N >"$TMPD/endB") & PB=$!
wait $PA $PB
fair=$(awk -v t0="$t0" -v a="$(cat "$TMPD/endA")" -v b="$(cat "$TMPD/endB")" 'BEGIN { e = (a > b ? a : b) - t0; d = a > b ? a - b : b - a; printf "%d %.3f %.3f", d < e / 4, d, e }')
if [ "$(stext "$TMPD/strA")" = "\"$(cat "$TMPD/runA")\"" ] && [ "$(stext "$TMPD/strB")" = "\"$(cat "$TMPD/runB")\"" ]; then ok server_two_long_prompts
else fail server_two_long_prompts "$(stext "$TMPD/strA") / $(stext "$TMPD/strB")"; fi
case "$fair" in 1*) ok server_two_long_prompts_take_turns;; *) fail server_two_long_prompts_take_turns "ends apart, both took (s): $fair";; esac

# a client that leaves while its long prompt is read: the prefill stops between pieces, the request
# counts as aborted, what was read stays in the slot's cache (the same prompt again re-uses it).
# The client leaves when it sees the first ': prefill' comment (sent after 1 s of reading, so some of
# the prompt is in the cache whatever the load); ~3840 tokens at -b 1 take ~2.7 s here (load 4).
HUGE=$(for i in $(seq 1 160); do printf 'And the earth was without form, and void; and darkness was upon the face of the deep. '; done)
ab0=$(curl -s "http://127.0.0.1:$PORT4/metrics" | sed -n 's/^moerun_requests_aborted_total //p')
curl -sN --max-time 60 "http://127.0.0.1:$PORT4/v1/completions" -d "{\"prompt\":\"$HUGE\",\"max_tokens\":4,\"temperature\":0,\"stream\":true}" >"$TMPD/strH" 2>/dev/null & PC=$!
i=0
while [ $i -lt 1200 ] && kill -0 $PC 2>/dev/null && ! grep -q '^: prefill' "$TMPD/strH"; do sleep 0.05; i=$((i + 1)); done
kill $PC 2>/dev/null; wait $PC 2>/dev/null
i=0; ab1=$ab0
while [ $i -lt 100 ] && [ "$ab1" = "$ab0" ]; do
    sleep 0.05; i=$((i + 1))
    ab1=$(curl -s "http://127.0.0.1:$PORT4/metrics" | sed -n 's/^moerun_requests_aborted_total //p')
done
code=$(curl -s -o "$TMPD/body" -w '%{http_code}' "http://127.0.0.1:$PORT4/v1/completions" -d "{\"prompt\":\"$HUGE\",\"max_tokens\":1,\"temperature\":0}")
cached=$(sed -n 's/.*"cached_tokens":\([0-9]*\).*/\1/p' "$TMPD/body"); np=$(sed -n 's/.*"prompt_tokens":\([0-9]*\).*/\1/p' "$TMPD/body")
if ! grep -q '^: prefill' "$TMPD/strH" && grep -q '"text"' "$TMPD/strH"; then
    skip server_cancel_during_prefill "the $np-token prompt was read within 1 s (no ': prefill' comment): nothing to interrupt on this machine"
elif [ "$ab1" = "$((ab0 + 1))" ] && ! grep -q '"text"' "$TMPD/strH" && [ "$code" = 200 ] \
   && [ -n "$cached" ] && [ "$cached" -gt 0 ] && [ "$cached" -lt "$((np - 1))" ]; then ok server_cancel_during_prefill
else fail server_cancel_during_prefill "aborted $ab0 -> $ab1, code $code, cached $cached of $np, stream $(head -c 200 "$TMPD/strH")"; fi
kill $SRV; wait $SRV 2>/dev/null

# --api-key: every endpoint but /health needs it (Bearer or x-api-key)
PORT2=$((PORT + 1))
"$MOERUN" server -m "$K" --port $PORT2 -t 1 --api-key s3cret >/dev/null 2>"$TMPD/srv2.err" &
SRV=$!
for i in $(seq 1 100); do curl -s "http://127.0.0.1:$PORT2/health" 2>/dev/null | grep -q '"ok"' && break; sleep 0.1; done
c1=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT2/v1/models")
c2=$(curl -s -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer wrong' "http://127.0.0.1:$PORT2/v1/models")
c3=$(curl -s -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer s3cret' "http://127.0.0.1:$PORT2/v1/models")
c4=$(curl -s -o /dev/null -w '%{http_code}' -H 'x-api-key: s3cret' "http://127.0.0.1:$PORT2/v1/models")
c5=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT2/health")
if [ "$c1$c2$c3$c4$c5" = 401401200200200 ]; then ok server_api_key; else fail server_api_key "codes $c1 $c2 $c3 $c4 $c5"; fi
kill $SRV; wait $SRV 2>/dev/null

# deepseek4 (random weights): a tool-call history rendered in DSML, and the next turn (history +
# the model's own reply) re-uses the cached prompt
D=$SHARED/models/tiny-deepseek4.gguf
PORT3=$((PORT + 2))
"$MOERUN" server -m "$D" --port $PORT3 -t 1 -c 2048 >/dev/null 2>"$TMPD/srv3.err" &
SRV=$!
for i in $(seq 1 100); do curl -s "http://127.0.0.1:$PORT3/health" 2>/dev/null | grep -q '"ok"' && break; sleep 0.1; done
B="{$TOOLMSGS,\"max_tokens\":4,\"temperature\":0}"
curl -s "http://127.0.0.1:$PORT3/apply-template" -d "$B" >"$TMPD/tmpl"
if grep -q '</think>\\n\\n<｜DSML｜tool_calls>\\n<｜DSML｜invoke name=\\"get_verse\\">\\n<｜DSML｜parameter name=\\"book\\" string=\\"true\\">Genesis</｜DSML｜parameter>' "$TMPD/tmpl" \
   && grep -q '<tool_result>In the beginning</tool_result><｜Assistant｜></think>' "$TMPD/tmpl"; then ok server_ds4_tool_render
else fail server_ds4_tool_render "$(head -c 300 "$TMPD/tmpl")"; fi
curl -s "http://127.0.0.1:$PORT3/v1/chat/completions" -d "$B" >"$TMPD/r1"
p1=$(sed -n 's/.*"prompt_tokens":\([0-9]*\).*/\1/p' "$TMPD/r1")
reply=$(sed -n 's/.*"content":\("[^"]*"\).*/\1/p' "$TMPD/r1")
B2=$(printf '%s' "$B" | sed "s|\],\"tools\"|,{\"role\":\"assistant\",\"content\":$reply},{\"role\":\"user\",\"content\":\"And then?\"}],\"tools\"|")
curl -s "http://127.0.0.1:$PORT3/v1/chat/completions" -d "$B2" >"$TMPD/r2"
c2=$(sed -n 's/.*"cached_tokens":\([0-9]*\).*/\1/p' "$TMPD/r2")
if [ -n "$p1" ] && [ -n "$c2" ] && [ "$c2" -ge "$p1" ]; then ok server_ds4_tool_history_cache
else fail server_ds4_tool_history_cache "turn 1 prompt '$p1', turn 2 cached '$c2': $(head -c 200 "$TMPD/r2")"; fi
kill $SRV; wait $SRV 2>/dev/null
expect_err server_needs_model "required" "$MOERUN" server
