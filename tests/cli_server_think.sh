#!/bin/sh
# moerun server, thinking on tiny-deepseek4 (the deepseek4 template's thinking mode):
# reasoning_content and Anthropic thinking blocks apart from the answer, streams reassembled, the
# budget, thinking off, history (tests/server_think.py); a template without thinking refuses it.
. tests/lib.sh
if ! command -v curl >/dev/null 2>&1 || ! command -v python3 >/dev/null 2>&1; then fail server_think_tools "curl or python3 is not installed"; exit 1; fi
start() { # start MODEL TEMPLATE: a server on a free port ($PORT, $SRV)
  up=0
  for try in 1 2 3; do
    PORT=$((20000 + ($$ * 17 + 2713 * try + ${#1}) % 20000))
    "$MOERUN" server -m "$1" --chat-template "$2" --port $PORT -t 1 -c 1024 >/dev/null 2>"$TMPD/srv.err" &
    SRV=$!
    for _ in $(seq 1 150); do
      if grep -q '^listening' "$TMPD/srv.err" && curl -s "http://127.0.0.1:$PORT/health" 2>/dev/null | grep -q '"ok"'; then up=1; break; fi
      kill -0 $SRV 2>/dev/null || break
      sleep 0.1
    done
    [ $up -eq 1 ] && return 0
    kill $SRV 2>/dev/null; wait $SRV 2>/dev/null
    grep -q "cannot listen" "$TMPD/srv.err" || break
  done
  fail server_think_start "server did not start: $(head -c 300 "$TMPD/srv.err")"
  exit 1
}
trap 'kill $SRV 2>/dev/null; rm -rf "$TMPD"' EXIT
start "$SHARED/models/tiny-deepseek4.gguf" deepseek4
python3 tests/server_think.py "http://127.0.0.1:$PORT"
kill $SRV; wait $SRV 2>/dev/null
start "$SHARED/models/tiny-llama.gguf" llama3
code=$(curl -s -o "$TMPD/body" -w '%{http_code}' "http://127.0.0.1:$PORT/v1/chat/completions" \
  -d '{"messages":[{"role":"user","content":"x"}],"max_tokens":2,"reasoning_effort":"high"}')
if [ "$code" = 400 ] && grep -q "llama3 has no thinking mode" "$TMPD/body"; then ok server_think_400_template
else fail server_think_400_template "code $code $(head -c 300 "$TMPD/body")"; fi
kill $SRV; wait $SRV 2>/dev/null
