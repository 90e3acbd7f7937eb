# moerun cache-sim: help, the published LRU/Belady numbers on the shared trace, errors.
. tests/lib.sh
TRACE=$SHARED/golden/routing/kjv-moe.trace.bin

expect_ok cache_sim_help "$MOERUN" cache-sim --help
grep -q 'belady' "$TMPD/o" && grep -q 'hazard' "$TMPD/o" && ok cache_sim_help_lists_policies || fail cache_sim_help_lists_policies "$(head -c 300 "$TMPD/o")"

if "$MOERUN" cache-sim --trace "$TRACE" --policy lru >"$TMPD/lru" 2>"$TMPD/e"; then
    # the lru row and the belady row (always printed) carry the published numbers
    if grep -Eq '^lru +35\.20 .* 64\.26 .* 87\.73 ' "$TMPD/lru" && grep -Eq '^belady +65\.39 .* 86\.03 .* 96\.02 ' "$TMPD/lru"; then
        ok cache_sim_lru_belady
    else fail cache_sim_lru_belady "$(cat "$TMPD/lru")"; fi
else fail cache_sim_lru_belady "exit $?: $(head -c 300 "$TMPD/e")"; fi

if "$MOERUN" cache-sim --trace "$TRACE" --policy hazard --sizes 50 >"$TMPD/h" 2>"$TMPD/e" &&
   grep -Eq '^hazard +\* +72\.[0-9][0-9]' "$TMPD/h"; then ok cache_sim_default_policy
else fail cache_sim_default_policy "$(cat "$TMPD/h" "$TMPD/e" | head -c 400)"; fi

expect_err cache_sim_bad_policy "unknown policy" "$MOERUN" cache-sim --trace "$TRACE" --policy nope
expect_err cache_sim_bad_sizes "sizes" "$MOERUN" cache-sim --trace "$TRACE" --sizes 25,abc
expect_err cache_sim_bad_sizes_range "sizes" "$MOERUN" cache-sim --trace "$TRACE" --sizes 150
printf 'KJVR\001\000\000\000' >"$TMPD/bad.bin"
expect_err cache_sim_truncated_trace "truncated" "$MOERUN" cache-sim --trace "$TMPD/bad.bin"
head -c 100 "$TRACE" >"$TMPD/short.bin"
expect_err cache_sim_short_trace "size" "$MOERUN" cache-sim --trace "$TMPD/short.bin"
expect_err cache_sim_missing_trace "cannot open" "$MOERUN" cache-sim --trace "$TMPD/none.bin"
expect_err cache_sim_unknown_option "unknown option" "$MOERUN" cache-sim --frobnicate 1
