#!/bin/sh
# moerun run: greedy generations equal the reference's, timings on stderr, errors.
. tests/lib.sh
A=$SHARED/models/aidreams260K.gguf
K=$SHARED/models/kjv-moe-q8_0.gguf

# ids printed by --show-ids must equal the golden greedy continuation
check_greedy() { name=$1 model=$2 prompt=$3 n=$4 golden=$5
  if "$MOERUN" run -m "$model" -p "$prompt" --temp 0 -n "$n" --show-ids >"$TMPD/o" 2>"$TMPD/e"; then
    got=$(sed -n 's/^ids: //p' "$TMPD/o"); want=$(tr -d ' \n' <"$golden")
    if [ "$got" = "$want" ]; then ok "$name"; else fail "$name" "got $got want $want"; fi
  else fail "$name" "exit $?: $(head -c 300 "$TMPD/e")"; fi; }
check_greedy run_aidreams_greedy64 "$A" "I dreamed" 64 "$SHARED/golden/aidreams260K.greedy64.txt"
check_greedy run_kjv_greedy48 "$K" "And God said" 48 "$SHARED/golden/kjv-moe-q8_0.greedy48.txt"

# the same with 1 thread (results must not depend on the thread count)
if "$MOERUN" run -m "$K" -p "And God said" --temp 0 -n 48 -t 1 --show-ids >"$TMPD/o" 2>"$TMPD/e" &&
   [ "$(sed -n 's/^ids: //p' "$TMPD/o")" = "$(tr -d ' \n' <"$SHARED/golden/kjv-moe-q8_0.greedy48.txt")" ]; then
  ok run_kjv_greedy48_t1; else fail run_kjv_greedy48_t1 "$(head -c 300 "$TMPD/e")"; fi

# text starts with the prompt; stderr reports load, prompt and generation speed
"$MOERUN" run -m "$A" -p "I dreamed" --temp 0 -n 8 >"$TMPD/o" 2>"$TMPD/e"
if head -c 9 "$TMPD/o" | grep -q "I dreamed" && grep -q "^load: " "$TMPD/e" &&
   grep -q "^prompt: 7 tokens in .* tok/s" "$TMPD/e" && grep -q "^generated: 8 tokens in .* tok/s" "$TMPD/e"; then
  ok run_output; else fail run_output "stdout=$(head -c 200 "$TMPD/o") stderr=$(head -c 300 "$TMPD/e")"; fi

# sampling with a seed is reproducible, and differs from greedy for some seed
"$MOERUN" run -m "$A" -p "I dreamed" --temp 1.0 --seed 7 -n 32 --show-ids >"$TMPD/s1" 2>/dev/null
"$MOERUN" run -m "$A" -p "I dreamed" --temp 1.0 --seed 7 -n 32 --show-ids >"$TMPD/s2" 2>/dev/null
"$MOERUN" run -m "$A" -p "I dreamed" --temp 0 -n 32 --show-ids >"$TMPD/g" 2>/dev/null
if cmp -s "$TMPD/s1" "$TMPD/s2" && ! cmp -s "$TMPD/s1" "$TMPD/g"; then ok run_seed; else fail run_seed "seeded runs differ or equal greedy"; fi

expect_err run_no_model "required" "$MOERUN" run -p hi
expect_err run_bad_model "" "$MOERUN" run -m "$TMPD/nope.gguf" -p hi
expect_err run_bad_option "unknown" "$MOERUN" run -m "$A" -p hi --bogus
expect_ok run_help "$MOERUN" run --help
