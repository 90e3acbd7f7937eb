#!/bin/sh
# A model file truncated under a running `moerun server` (docs/RELIABILITY.md): the requests after
# the truncation fail with a 500 (plain) or an error event (streamed) naming the file and both sizes,
# /health answers 503 with the same message, and the server keeps running (no SIGBUS).
. tests/lib.sh
if ! command -v curl >/dev/null 2>&1; then fail shrink_curl "curl is not installed"; exit 1; fi
M=$TMPD/model.gguf
cp "$SHARED/models/tiny-qwen3moe.gguf" "$M"
size=$(wc -c <"$M")
up=0
for try in 1 2 3; do # another program may hold the port: the next one
  PORT=$((20000 + ($$ + 7919 * try) % 20000))
  "$MOERUN" server -m "$M" --port $PORT -t 1 >"$TMPD/srv.out" 2>"$TMPD/srv.err" &
  SRV=$!
  trap 'kill $SRV 2>/dev/null; rm -rf "$TMPD"' EXIT
  for _ in $(seq 1 150); do
    if curl -s "http://127.0.0.1:$PORT/health" 2>/dev/null | grep -q '"ok"'; then up=1; break; fi
    kill -0 $SRV 2>/dev/null || break
    sleep 0.1
  done
  [ $up -eq 1 ] && break
  grep -q "Address already in use" "$TMPD/srv.err" || break
done
if [ $up -eq 1 ]; then ok shrink_server_up; else fail shrink_server_up "$(head -c 300 "$TMPD/srv.err")"; exit 1; fi
req='{"prompt":"Once upon a time","max_tokens":4,"temperature":0}'
code=$(curl -s -o "$TMPD/b1" -w '%{http_code}' "http://127.0.0.1:$PORT/v1/completions" -d "$req")
if [ "$code" = 200 ]; then ok shrink_before; else fail shrink_before "code $code $(head -c 300 "$TMPD/b1")"; fi
truncate -s $((size / 2)) "$M"
want="the file shrank from $size to $((size / 2)) bytes"
code=$(curl -s -o "$TMPD/b2" -w '%{http_code}' "http://127.0.0.1:$PORT/v1/completions" -d "$req")
if [ "$code" = 500 ] && grep -q "$want" "$TMPD/b2" && grep -qF "$M" "$TMPD/b2"; then ok shrink_request_500
else fail shrink_request_500 "code $code $(head -c 300 "$TMPD/b2")"; fi
curl -s "http://127.0.0.1:$PORT/v1/completions" -d '{"prompt":"Once upon a time","max_tokens":4,"temperature":0,"stream":true}' >"$TMPD/sse"
if grep -q '^data: {"error"' "$TMPD/sse" && grep -q "$want" "$TMPD/sse"; then ok shrink_stream_error_event
else fail shrink_stream_error_event "$(head -c 300 "$TMPD/sse")"; fi
code=$(curl -s -o "$TMPD/h" -w '%{http_code}' "http://127.0.0.1:$PORT/health")
if [ "$code" = 503 ] && grep -q "$want" "$TMPD/h"; then ok shrink_health_503; else fail shrink_health_503 "code $code $(head -c 300 "$TMPD/h")"; fi
if kill -0 $SRV 2>/dev/null; then ok shrink_server_alive
else wait $SRV; fail shrink_server_alive "exited with $?: $(tail -c 300 "$TMPD/srv.err")"; fi
