#!/bin/sh
# moerun server --parallel 4 on deepseek4: four concurrent greedy requests decode in shared batched
# steps (one forward pass for all four sequences, each with its own compressor and indexer state), and
# each gets exactly the text it gets alone. 150 tokens take the sequences across ratio-4 and
# ratio-128 compressor block ends.
. tests/lib.sh
export LC_ALL=C # the random-weight model's text has bytes that are not UTF-8: sed compares bytes
D=$SHARED/models/tiny-deepseek4.gguf
if ! command -v curl >/dev/null 2>&1; then fail server_ds4_curl "curl is not installed"; exit 1; fi
up=0
for try in 1 2 3; do # another program may hold the port: the next one (ours says "listening" once bound)
  PORT=$((20000 + ($$ * 7 + 4241 * try) % 20000))
  "$MOERUN" server -m "$D" --port $PORT -t 2 -c 512 --parallel 4 >/dev/null 2>"$TMPD/srv.err" &
  SRV=$!
  trap 'kill $SRV 2>/dev/null; rm -rf "$TMPD"' EXIT
  for _ in $(seq 1 150); do
    if grep -q '^listening' "$TMPD/srv.err" && curl -s "http://127.0.0.1:$PORT/health" 2>/dev/null | grep -q '"ok"'; then up=1; break; fi
    kill -0 $SRV 2>/dev/null || break
    sleep 0.1
  done
  [ $up -eq 1 ] && break
  kill $SRV 2>/dev/null; wait $SRV 2>/dev/null
  grep -q "cannot listen" "$TMPD/srv.err" || break
done
if [ $up -eq 1 ]; then ok server_ds4_health; else fail server_ds4_health "server did not start: $(head -c 300 "$TMPD/srv.err")"; exit 1; fi
if grep -q 'batched steps' "$TMPD/srv.err" && ! grep -q 'no batched' "$TMPD/srv.err"; then ok server_ds4_can_batch
else fail server_ds4_can_batch "$(head -c 300 "$TMPD/srv.err")"; fi
PROMPTS="And God said|In the beginning was|The LORD is my shepherd, I shall not want|Blessed"
gen() { curl -s "http://127.0.0.1:$PORT/v1/completions" -d "{\"prompt\":\"$1\",\"max_tokens\":150,\"temperature\":0}" >"$2"; }
for i in 1 2 3 4; do gen "$(echo "$PROMPTS" | cut -d'|' -f$i)" "$TMPD/solo$i"; done
m0=$(curl -s "http://127.0.0.1:$PORT/metrics" | sed -n 's/^moerun_decode_steps_total //p')
PIDS=""
for i in 1 2 3 4; do gen "$(echo "$PROMPTS" | cut -d'|' -f$i)" "$TMPD/par$i" & PIDS="$PIDS $!"; done
wait $PIDS
same=0 long=0
for i in 1 2 3 4; do
  t=$(sed 's/.*"text":\("\([^"\\]\|\\.\)*"\).*/\1/' "$TMPD/solo$i")
  p=$(sed 's/.*"text":\("\([^"\\]\|\\.\)*"\).*/\1/' "$TMPD/par$i")
  [ -n "$t" ] && [ "$t" = "$p" ] && same=$((same + 1))
  grep -q '"completion_tokens":150' "$TMPD/solo$i" && long=$((long + 1))
done
m=$(curl -s "http://127.0.0.1:$PORT/metrics")
steps=$(echo "$m" | sed -n 's/^moerun_decode_steps_total //p'); toks=$(echo "$m" | sed -n 's/^moerun_decode_step_tokens_total //p')
if [ $same = 4 ]; then ok server_ds4_parallel_same_as_solo; else fail server_ds4_parallel_same_as_solo "$same of 4 equal to their solo runs"; fi
if [ $long -ge 1 ]; then ok server_ds4_parallel_long; else fail server_ds4_parallel_long "no request generated 150 tokens: $(head -c 300 "$TMPD/solo1")"; fi
if [ -n "$steps" ] && [ -n "$m0" ] && [ "$toks" -gt "$steps" ]; then ok server_ds4_parallel_batched
else fail server_ds4_parallel_batched "steps $m0 -> $steps tokens $toks"; fi
kill $SRV; wait $SRV 2>/dev/null
