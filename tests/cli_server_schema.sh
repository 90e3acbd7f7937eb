#!/bin/sh
# moerun server, constrained replies on kjv-moe (chatml, gpt-oss harmony tool calls) and tiny-deepseek4 (DSML,
# DeepSeek-V3.1): forced
# tool calls (tool_choice required / named, Anthropic any / tool, streamed or not, parallel_tool_calls
# false) are one call of an allowed function with arguments valid against its schema, json_schema
# replies are valid (tests/server_agents.py, its own validator); schemas outside the subset are 400s
# naming the keyword. MR_AGENT_N requests of each kind per model (default 8 and 4; `make test-agents`: 100).
. tests/lib.sh
if ! command -v curl >/dev/null 2>&1 || ! command -v python3 >/dev/null 2>&1; then fail server_schema_tools "curl or python3 is not installed"; exit 1; fi
post() { curl -s -o "$TMPD/body" -w '%{http_code}' "http://127.0.0.1:$PORT$1" -d "$2"; }
trap 'kill $SRV 2>/dev/null; rm -rf "$TMPD"' EXIT

server_start "$SHARED/models/kjv-moe-q8_0.gguf" chatml
python3 tests/server_agents.py "http://127.0.0.1:$PORT" "${MR_AGENT_N:-8}" kjv
# refusals: a schema outside the subset, a forced call whose function's schema is, a template with no calls
M='"messages":[{"role":"user","content":"x"}]'
code=$(post /v1/chat/completions "{$M,\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"a\",\"schema\":{\"type\":\"string\",\"pattern\":\"x\"}}}}")
if [ "$code" = 400 ] && grep -q "keyword 'pattern' is not supported" "$TMPD/body"; then ok server_schema_400; else fail server_schema_400 "code $code $(head -c 300 "$TMPD/body")"; fi
T='"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"a":{"type":"string","format":"date"}}}}}]'
code=$(post /v1/chat/completions "{$M,$T,\"tool_choice\":\"required\"}")
if [ "$code" = 400 ] && grep -q "keyword 'format' is not supported (at tool f/properties/a)" "$TMPD/body"; then ok server_forced_call_schema_400
else fail server_forced_call_schema_400 "code $code $(head -c 300 "$TMPD/body")"; fi
# the same tool with tool_choice auto is not constrained: no 400
code=$(post /v1/chat/completions "{$M,$T,\"max_tokens\":2}")
if [ "$code" = 200 ]; then ok server_auto_call_schema_unchecked; else fail server_auto_call_schema_unchecked "code $code $(head -c 300 "$TMPD/body")"; fi
kill $SRV; wait $SRV 2>/dev/null

server_start "$SHARED/models/tiny-deepseek4.gguf" deepseek4
python3 tests/server_agents.py "http://127.0.0.1:$PORT" "${MR_AGENT_N:-4}" ds4
kill $SRV; wait $SRV 2>/dev/null
# the DeepSeek-V3.1 and gpt-oss (harmony) call formats on the same two models
server_start "$SHARED/models/kjv-moe-q8_0.gguf" gpt-oss
python3 tests/server_agents.py "http://127.0.0.1:$PORT" "${MR_AGENT_N:-4}" kjv_harmony
kill $SRV; wait $SRV 2>/dev/null
server_start "$SHARED/models/tiny-deepseek4.gguf" deepseek3
python3 tests/server_agents.py "http://127.0.0.1:$PORT" "${MR_AGENT_N:-4}" ds4_ds31
kill $SRV; wait $SRV 2>/dev/null
exit 0
