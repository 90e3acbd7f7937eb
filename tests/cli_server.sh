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

kill $SRV; wait $SRV 2>/dev/null
expect_err server_needs_model "required" "$MOERUN" server
