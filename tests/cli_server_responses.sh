#!/bin/sh
# moerun server, the OpenAI Responses API (/v1/responses) on kjv-moe (chatml calls) and tiny-deepseek4
# (DSML calls): whole and streamed replies with the same seed (typed events reassembled), forced
# calls, the function_call -> function_call_output -> answer round trip through previous_response_id,
# text.format json_schema, store false, refusals (tests/server_responses.py).
. tests/lib.sh
if ! command -v curl >/dev/null 2>&1 || ! command -v python3 >/dev/null 2>&1; then fail server_responses_tools "curl or python3 is not installed"; exit 1; fi
trap 'kill $SRV 2>/dev/null; rm -rf "$TMPD"' EXIT
server_start "$SHARED/models/kjv-moe-q8_0.gguf" chatml
python3 tests/server_responses.py "http://127.0.0.1:$PORT" responses_kjv
kill $SRV; wait $SRV 2>/dev/null
server_start "$SHARED/models/tiny-deepseek4.gguf" deepseek4
python3 tests/server_responses.py "http://127.0.0.1:$PORT" responses_ds4 nocut think
kill $SRV; wait $SRV 2>/dev/null
exit 0
