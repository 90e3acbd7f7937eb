#!/bin/sh
# Runs the test binaries (build/tests/test_*) and the CLI scripts (tests/cli_*.sh) in two tiers:
#   unit    those that need nothing but the checkout (no mention of the shared data: t_shared /
#           SHARED); they synthesize any model they use
#   shared  the rest, which read ../shared (models, golden files)
# `run.sh BUILD unit` runs the first tier, `run.sh BUILD shared` the second, `run.sh BUILD` both
# (unit first). Each test prints "ok NAME" or "FAIL NAME: why" per case, "skip NAME: why" for a check
# that cannot hold in this build (counted apart, shown always); a program that crashes or exits
# non-zero without printing a FAIL line counts as one failure. Last line: "N passed, N failed" (and
# ", N skipped" when some were).
# MR_RUNNER (e.g. "qemu-aarch64 -L /usr/aarch64-linux-gnu", make test-aarch64) runs every binary, the
# CLI's included (through a wrapper script, as the CLI scripts call "$MOERUN"); MR_ONLY="test_a cli_b"
# runs only the tests of those names, MR_SKIP="cli_c" all but those.
BUILD=${1:-build}
TIER=${2:-all}
export MR_SHARED=${MR_SHARED:-../shared}
pass=0; fail=0; skip=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ -n "$MR_RUNNER" ]; then
    export MR_RUNNER # tests that cannot hold under an emulator skip them (test_server_abuse)
    printf '#!/bin/sh\nexec %s "%s" "$@"\n' "$MR_RUNNER" "$(cd "$BUILD" && pwd)/moerun" >"$tmp/moerun"
    chmod +x "$tmp/moerun"
    # the fuzz replayers beside it (cli_fuzz.sh runs $(dirname $MOERUN)/fuzz-replay/*)
    mkdir -p "$tmp/fuzz-replay"
    for f in "$BUILD"/fuzz-replay/fuzz_*; do
        [ -x "$f" ] || continue
        printf '#!/bin/sh\nexec %s "%s" "$@"\n' "$MR_RUNNER" "$(cd "$(dirname "$f")" && pwd)/$(basename "$f")" >"$tmp/fuzz-replay/$(basename "$f")"
        chmod +x "$tmp/fuzz-replay/$(basename "$f")"
    done
    export MOERUN=${MOERUN:-$tmp/moerun}
else
    export MOERUN=${MOERUN:-$BUILD/moerun}
fi

# source of a test: tests/NAME.c for a binary, the script itself otherwise
needs_shared() {
    case "$1" in *.sh) src=$1;; *) src=tests/$(basename "$1").c;; esac
    grep -qE 't_shared|SHARED' "$src"
}

run_tier() {
    for t in "$BUILD"/tests/test_* tests/cli_*.sh; do
        [ -e "$t" ] || continue
        case "$t" in *.d|*.o) continue;; esac
        if needs_shared "$t"; then [ "$1" = shared ] || continue; else [ "$1" = unit ] || continue; fi
        name=$(basename "$t")
        if [ -n "$MR_ONLY" ]; then case " $MR_ONLY " in *" ${name%.sh} "*) ;; *) continue;; esac; fi
        if [ -n "$MR_SKIP" ]; then case " $MR_SKIP " in *" ${name%.sh} "*) echo "== $1 $name: not run (MR_SKIP)"; continue;; esac; fi
        start=$(date +%s)
        if [ "${t%.sh}" != "$t" ]; then sh "$t" >"$tmp/out" 2>&1; else $MR_RUNNER "$t" >"$tmp/out" 2>&1; fi
        rc=$?
        p=$(grep -c '^ok ' "$tmp/out"); f=$(grep -c '^FAIL ' "$tmp/out"); k=$(grep -c '^skip ' "$tmp/out")
        if [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then f=1; echo "FAIL $name: exited with status $rc" >>"$tmp/out"; fi
        pass=$((pass + p)); fail=$((fail + f)); skip=$((skip + k))
        echo "== $1 $name: $p passed, $f failed$( [ "$k" -eq 0 ] || echo ", $k skipped") ($(( $(date +%s) - start ))s)"
        if [ "$f" -ne 0 ] || [ -n "$VERBOSE" ]; then grep -v '^ok ' "$tmp/out" | head -n 60
        elif [ "$k" -ne 0 ]; then grep '^skip ' "$tmp/out"; fi
    done
}

if [ "$TIER" = all ] || [ "$TIER" = unit ]; then run_tier unit; fi
if [ "$TIER" = all ] || [ "$TIER" = shared ]; then
    if [ -d "$MR_SHARED/models" ]; then run_tier shared
    else echo "FAIL shared tier: $MR_SHARED/models not found (clone the shared data next to the repo, or run make test-unit)"; fail=$((fail + 1)); fi
fi
if [ "$skip" -eq 0 ]; then echo "$pass passed, $fail failed"; else echo "$pass passed, $fail failed, $skip skipped"; fi
[ "$fail" -eq 0 ]
