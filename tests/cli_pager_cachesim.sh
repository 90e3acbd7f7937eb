# moerun cache-sim: help, the published LRU/Belady numbers on the shared trace, errors.
. tests/lib.sh
TRACE=$SHARED/golden/routing/kjv-moe.trace.bin

expect_ok cache_sim_help "$MOERUN" cache-sim --help
grep -q 'belady' "$TMPD/o" && grep -q 'hazard' "$TMPD/o" && grep -q 'hot .*(default)' "$TMPD/o" && ok cache_sim_help_lists_policies || fail cache_sim_help_lists_policies "$(head -c 300 "$TMPD/o")"

if "$MOERUN" cache-sim --trace "$TRACE" --policy lru >"$TMPD/lru" 2>"$TMPD/e"; then
    # the lru row and the belady row (always printed) carry the published numbers
    if grep -Eq '^lru +35\.20 .* 64\.26 .* 87\.73 ' "$TMPD/lru" && grep -Eq '^belady +65\.39 .* 86\.03 .* 96\.02 ' "$TMPD/lru"; then
        ok cache_sim_lru_belady
    else fail cache_sim_lru_belady "$(cat "$TMPD/lru")"; fi
else fail cache_sim_lru_belady "exit $?: $(head -c 300 "$TMPD/e")"; fi

if "$MOERUN" cache-sim --trace "$TRACE" --policy hot --sizes 50 >"$TMPD/h" 2>"$TMPD/e" &&
   grep -Eq '^hot +\* +72\.[0-9][0-9]' "$TMPD/h" && grep -Eq '^static +70\.78 ' "$TMPD/h"; then ok cache_sim_default_policy
else fail cache_sim_default_policy "$(cat "$TMPD/h" "$TMPD/e" | head -c 400)"; fi

expect_err cache_sim_bad_policy "unknown policy" "$MOERUN" cache-sim --trace "$TRACE" --policy nope
expect_err cache_sim_bad_sizes "sizes" "$MOERUN" cache-sim --trace "$TRACE" --sizes 25,abc
expect_err cache_sim_bad_sizes_range "sizes" "$MOERUN" cache-sim --trace "$TRACE" --sizes 150
printf 'KJVR\001\000\000\000' >"$TMPD/bad.bin"
expect_err cache_sim_truncated_trace "truncated" "$MOERUN" cache-sim --trace "$TMPD/bad.bin"
head -c 100 "$TRACE" >"$TMPD/short.bin"
expect_err cache_sim_short_trace "size" "$MOERUN" cache-sim --trace "$TMPD/short.bin"
expect_err cache_sim_missing_trace "cannot open" "$MOERUN" cache-sim --trace "$TMPD/none.bin"
# a synthesized trace: uniform routing and Zipf(1) popularity, the same trace for the same seed
if "$MOERUN" cache-sim --synth 2000,2,4,32,1.0,5 --policy lru --sizes 25 >"$TMPD/s1" 2>"$TMPD/e" &&
   "$MOERUN" cache-sim --synth 2000,2,4,32,1.0,5 --policy lru --sizes 25 >"$TMPD/s2" 2>>"$TMPD/e" &&
   cmp -s "$TMPD/s1" "$TMPD/s2" && grep -q '2000 tokens, 2 layers, top-4 of 32 experts' "$TMPD/s1" &&
   grep -Eq '^static ' "$TMPD/s1"; then ok cache_sim_synth
else fail cache_sim_synth "$(cat "$TMPD/s1" "$TMPD/e" | head -c 400)"; fi
expect_err cache_sim_synth_bad "synth" "$MOERUN" cache-sim --synth 10,2
expect_err cache_sim_synth_shape "bad shape" "$MOERUN" cache-sim --synth 10,2,40,32
expect_err cache_sim_unknown_option "unknown option" "$MOERUN" cache-sim --frobnicate 1
