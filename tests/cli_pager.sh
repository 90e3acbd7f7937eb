# Expert paging through the CLI: moerun logits with --ram-budget gives the same bytes as without,
# writes a parseable --stats-file, fails cleanly on injected read faults and on budgets below the floor.
. tests/lib.sh
M=$SHARED/models/kjv-moe-q8_0.gguf
T=$(cat "$SHARED/golden/tokens-kjv64.txt")
MIN=800K # below the floor: 4 slots x 216 KiB = 864 KiB
OK=4M    # 18 slots

expect_ok pager_logits_plain "$MOERUN" logits -m "$M" --tokens "$T" --decode -t 2 -o "$TMPD/plain.lgts"
expect_ok pager_logits_paged "$MOERUN" logits -m "$M" --tokens "$T" --decode -t 2 -o "$TMPD/paged.lgts" \
    --ram-budget $OK --stats-file "$TMPD/stats.jsonl"
cp "$TMPD/e" "$TMPD/summary"
if cmp -s "$TMPD/plain.lgts" "$TMPD/paged.lgts"; then ok pager_logits_identical; else fail pager_logits_identical "logits differ"; fi
for k in "hot" "Belady" "per-layer hit rate" "O_DIRECT\|buffered"; do
    if grep -q "^pager: .*$k" "$TMPD/summary"; then ok "pager_summary_$(echo "$k" | tr -c 'a-zA-Z\n' _)"
    else fail "pager_summary_$k" "$(cat "$TMPD/summary")"; fi
done

# stats file: one strict JSON object per decoded token, counters consistent with the totals
n=$(echo "$T" | tr ',' '\n' | grep -c .)
lines=$(wc -l <"$TMPD/stats.jsonl")
JSONPAT='^{"token":[0-9]+,"hits":[0-9]+,"misses":[0-9]+,"reads":[0-9]+,"bytes_read":[0-9]+,"stall_ms":[0-9]+\.[0-9]+,"total_hits":[0-9]+,"total_misses":[0-9]+,"total_bytes_read":[0-9]+}$'
good=$(grep -Ec "$JSONPAT" "$TMPD/stats.jsonl")
if [ "$lines" -eq "$n" ] && [ "$good" -eq "$n" ]; then ok pager_stats_file_lines; else fail pager_stats_file_lines "$lines lines, $good well-formed, want $n"; fi
if command -v python3 >/dev/null 2>&1; then
    if python3 -c '
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert [r["token"] for r in rows] == list(range(len(rows)))
assert sum(r["misses"] for r in rows) == rows[-1]["total_misses"] > 0
assert sum(r["hits"] for r in rows) == rows[-1]["total_hits"]
assert sum(r["bytes_read"] for r in rows) == rows[-1]["total_bytes_read"]
' "$TMPD/stats.jsonl" 2>"$TMPD/py"; then ok pager_stats_file_json; else fail pager_stats_file_json "$(cat "$TMPD/py")"; fi
fi

MOERUN_PAGER_FAULT=eio:9 expect_err pager_fault_eio "Input/output error" \
    "$MOERUN" logits -m "$M" --tokens "$T" --decode -t 2 -o "$TMPD/f.lgts" --ram-budget $OK
MOERUN_PAGER_FAULT=short:9 expect_err pager_fault_short "short read" \
    "$MOERUN" logits -m "$M" --tokens "$T" -t 2 -o "$TMPD/f.lgts" --ram-budget $OK
expect_err pager_budget_floor "minimum" "$MOERUN" logits -m "$M" --tokens "$T" -o "$TMPD/f.lgts" --ram-budget $MIN
expect_err pager_budget_bad "bad RAM budget" "$MOERUN" logits -m "$M" --tokens "$T" -o "$TMPD/f.lgts" --ram-budget 12Q
# auto: this 28 MB model fits in RAM, so paging stays off and the output is unchanged
expect_ok pager_budget_auto "$MOERUN" logits -m "$M" --tokens "$T" -t 2 -o "$TMPD/auto.lgts" --ram-budget auto
if grep -q "^pager: off" "$TMPD/e"; then ok pager_budget_auto_off; else fail pager_budget_auto_off "$(cat "$TMPD/e")"; fi

# moerun run: greedy text is the same at the floor budget; stats file has the prompt line + one per decode step
expect_ok pager_run_plain "$MOERUN" run -m "$M" -p "And God said" -n 24 --temp 0 -t 2
cp "$TMPD/o" "$TMPD/run_plain"
expect_ok pager_run_paged "$MOERUN" run -m "$M" -p "And God said" -n 24 --temp 0 -t 2 --ram-budget 864K \
    --stats-file "$TMPD/run.jsonl"
if cmp -s "$TMPD/o" "$TMPD/run_plain"; then ok pager_run_same_text; else fail pager_run_same_text "$(cat "$TMPD/o")"; fi
if grep -q "^pager: 4 slots" "$TMPD/e"; then ok pager_run_floor_budget; else fail pager_run_floor_budget "$(cat "$TMPD/e")"; fi
# the decode I/O efficiency line: a percentage, the decode's evals (one per decode step), a verdict
if grep -Eq "^pager: decode I/O efficiency [0-9]+% \(whole run, $(sed -n 's/.*(\([0-9]*\) decode steps).*/\1/p' "$TMPD/e") evals\).*: (bound by|disk and compute)" "$TMPD/e"
then ok pager_run_io_efficiency; else fail pager_run_io_efficiency "$(cat "$TMPD/e")"; fi
steps=$(sed -n 's/.*(\([0-9]*\) decode steps).*/\1/p' "$TMPD/e")
if [ -n "$steps" ] && [ "$(grep -Ec "$JSONPAT" "$TMPD/run.jsonl")" -eq $((steps + 1)) ]; then ok pager_run_stats_lines
else fail pager_run_stats_lines "steps '$steps', $(wc -l <"$TMPD/run.jsonl") lines"; fi
expect_err pager_run_bad_budget "bad RAM budget" "$MOERUN" run -m "$M" -p "x" --ram-budget lots

# guessing the next layer's experts (deepseek4: hash layers exact, others through the next router) and
# chunked reads on more I/O threads only change what is read when: the logits stay the same bytes
D=$SHARED/models/tiny-deepseek4.gguf
expect_ok pager_guess_plain "$MOERUN" logits -m "$D" --tokens "$T" --decode -t 2 -o "$TMPD/d0.lgts"
MOERUN_PAGER_GUESS=1 MOERUN_PAGER_CHUNK=64K MOERUN_PAGER_IO_THREADS=8 expect_ok pager_guess_paged \
    "$MOERUN" logits -m "$D" --tokens "$T" --decode -t 2 -o "$TMPD/d1.lgts" --ram-budget 7M
if cmp -s "$TMPD/d0.lgts" "$TMPD/d1.lgts"; then ok pager_guess_identical; else fail pager_guess_identical "logits differ"; fi
if grep -q "^pager: read ahead [1-9][0-9]* experts" "$TMPD/e"; then ok pager_guess_summary
else fail pager_guess_summary "no read-ahead line: $(cat "$TMPD/e")"; fi

# the server's /metrics with paging: decode's I/O efficiency and the counters behind it
if command -v curl >/dev/null 2>&1; then
    PORT=$((20000 + ($$ + 7) % 20000))
    "$MOERUN" server -m "$M" --port $PORT -t 2 --ram-budget $OK >"$TMPD/srv.out" 2>"$TMPD/srv.err" &
    SRV=$!
    up=0
    for i in $(seq 1 100); do
        if curl -s "http://127.0.0.1:$PORT/health" 2>/dev/null | grep -q '"ok"'; then up=1; break; fi
        sleep 0.1
    done
    curl -s "http://127.0.0.1:$PORT/v1/completions" -d '{"prompt":"And God said","max_tokens":16,"temperature":0}' >/dev/null
    mt=$(curl -s "http://127.0.0.1:$PORT/metrics")
    kill $SRV 2>/dev/null; wait $SRV 2>/dev/null
    if [ $up -eq 1 ] && echo "$mt" | grep -Eq '^moerun_pager_decode_io_efficiency 0*[0-9]\.[0-9]*[1-9]' &&
        echo "$mt" | grep -Eq '^moerun_pager_decode_miss_bytes_total [1-9]' &&
        echo "$mt" | grep -Eq '^moerun_pager_read_bytes_per_second [1-9]'; then ok pager_server_metrics
    else fail pager_server_metrics "$(echo "$mt" | grep pager) $(head -c 300 "$TMPD/srv.err")"; fi
fi
