#!/bin/sh
# Runs libFuzzer targets built by `make fuzz`: each for SECONDS, working corpus in BUILD/corpus/NAME
# (kept between runs), seeds from tests/fuzz/corpus/NAME and the crashes kept in tests/fuzz/crashes/NAME,
# new crashes written to BUILD/crash-NAME-*. Prints each target's final stats; exits 1 if any crashed.
# usage: tests/fuzz/run.sh BUILD SECONDS NAME...
BUILD=$1; SECONDS_EACH=$2; shift 2
status=0
for t in "$@"; do
    mkdir -p "$BUILD/corpus/$t"
    seeds="tests/fuzz/corpus/$t"
    extra=""
    [ -d "tests/fuzz/crashes/$t" ] && extra="tests/fuzz/crashes/$t"
    case "$t" in
        gguf) opts="-max_len=65536 -dict=tests/fuzz/gguf.dict"; extra="$extra $BUILD/seeds" ;;
        http) opts="-max_len=40000 -dict=tests/fuzz/http.dict" ;;  # past the 32 KiB header limit
        json) opts="-max_len=16384 -dict=tests/fuzz/json.dict" ;;
        schema) opts="-max_len=4096 -dict=tests/fuzz/json.dict" ;;
        tokenizer|chat) opts="-max_len=2048" ;;
        sampler) opts="-max_len=17000" ;;                         # 4096 logits
        approx) opts="-max_len=4097" ;;                            # the control file limit + 1
        *) opts="" ;;
    esac
    echo "== fuzz_$t for ${SECONDS_EACH}s"
    # shellcheck disable=SC2086
    nice -n 10 "$BUILD/fuzz_$t" -max_total_time="$SECONDS_EACH" -malloc_limit_mb=512 -rss_limit_mb=4096 \
        -artifact_prefix="$BUILD/crash-$t-" -print_final_stats=1 $opts \
        "$BUILD/corpus/$t" "$seeds" $extra 2>"$BUILD/fuzz_$t.log"
    rc=$?
    grep -E '^(stat::number_of_executed_units|stat::peak_rss_mb|Done)|ERROR|SUMMARY' "$BUILD/fuzz_$t.log" | head -n 20
    [ $rc -ne 0 ] && { echo "fuzz_$t: exit $rc, see $BUILD/fuzz_$t.log and $BUILD/crash-$t-*"; status=1; }
done
exit $status
