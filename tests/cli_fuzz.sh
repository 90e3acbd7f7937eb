#!/bin/sh
# Replays the kept fuzz inputs (tests/fuzz/corpus/NAME seeds, tests/fuzz/crashes/NAME: every crash
# found and fixed) through each fuzz target built without libFuzzer: a fixed crash that comes back
# fails here. Built by `make test` into $BUILD/fuzz-replay (BUILD from $MOERUN's directory).
# The tokenizer and chat targets read ../shared (MR_SHARED): vocabularies and tiny models.
. tests/lib.sh
RB=$(dirname "$MOERUN")/fuzz-replay
for src in tests/fuzz/fuzz_*.c; do
    t=$(basename "$src" .c); name=${t#fuzz_}
    if [ ! -x "$RB/$t" ]; then fail "${t}_replay" "$RB/$t not built"; continue; fi
    if "$RB/$t" "tests/fuzz/corpus/$name" "tests/fuzz/crashes/$name" >"$TMPD/o" 2>"$TMPD/e"; then
        cat "$TMPD/o"
    else
        fail "${t}_replay" "exit $?: $(grep -v '^replay ' "$TMPD/e" | head -c 600) (last input: $(grep '^replay ' "$TMPD/e" | tail -n 1))"
    fi
done
