#!/bin/sh
# moerun server driven by the official `openai` and `@anthropic-ai/sdk` npm clients
# (tests/server_clients.cjs): chat, stream helpers (finalChatCompletion / finalMessage), include_usage,
# a tool-calling history that re-uses the prompt cache, parallel requests, abort mid-stream, forced
# tool calls and json_schema replies; the Responses API (tests/server_clients_responses.cjs) on
# kjv-moe and tiny-deepseek4.
# The packages are not part of the repo: `make test-clients` installs them under $MR_NPM_DIR
# (default /tmp/moerun-npm); without node or the packages this script skips (prints no result).
. tests/lib.sh
NPM_DIR=${MR_NPM_DIR:-/tmp/moerun-npm}
export NODE_PATH="${NODE_PATH:+$NODE_PATH:}$NPM_DIR/node_modules"
if ! command -v node >/dev/null 2>&1 || ! command -v curl >/dev/null 2>&1 \
   || ! node -e "require('openai'); require('@anthropic-ai/sdk')" >/dev/null 2>&1; then
  echo "# skipped: node, curl or the openai / @anthropic-ai/sdk packages are absent (make test-clients installs them)"
  exit 0
fi
K=$SHARED/models/kjv-moe-q8_0.gguf
PORT=$((20000 + ($$ + 7) % 20000))
"$MOERUN" server -m "$K" --port $PORT -t 1 -c 1024 >/dev/null 2>"$TMPD/srv.err" &
SRV=$!
trap 'kill $SRV 2>/dev/null; rm -rf "$TMPD"' EXIT
for i in $(seq 1 100); do curl -s "http://127.0.0.1:$PORT/health" 2>/dev/null | grep -q '"ok"' && break; sleep 0.1; done
timeout 300 node tests/server_clients.cjs "http://127.0.0.1:$PORT"
rc=$?
[ $rc -eq 0 ] || [ $rc -eq 1 ] || fail server_clients "node exited with $rc"
timeout 300 node tests/server_clients_responses.cjs "http://127.0.0.1:$PORT" responses_kjv
rc=$?
[ $rc -eq 0 ] || [ $rc -eq 1 ] || fail server_clients_responses_kjv "node exited with $rc"
kill $SRV; wait $SRV 2>/dev/null
server_start "$SHARED/models/tiny-deepseek4.gguf" deepseek4
timeout 300 node tests/server_clients_responses.cjs "http://127.0.0.1:$PORT" responses_ds4 think
rc=$?
[ $rc -eq 0 ] || [ $rc -eq 1 ] || fail server_clients_responses_ds4 "node exited with $rc"
kill $SRV; wait $SRV 2>/dev/null
exit 0
