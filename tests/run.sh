#!/bin/sh
# Runs every test binary (build/tests/test_*) and every CLI script (tests/cli_*.sh).
# Each prints "ok NAME" or "FAIL NAME: why" per case; a program that crashes or exits
# non-zero without printing a FAIL line counts as one failure. Last line: "N passed, N failed".
BUILD=${1:-build}
export MOERUN=${MOERUN:-$BUILD/moerun}
export MR_SHARED=${MR_SHARED:-../shared}
pass=0; fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for t in "$BUILD"/tests/test_* tests/cli_*.sh; do
    [ -e "$t" ] || continue
    case "$t" in *.d|*.o) continue;; esac
    name=$(basename "$t")
    start=$(date +%s)
    if [ "${t%.sh}" != "$t" ]; then sh "$t" >"$tmp/out" 2>&1; else "$t" >"$tmp/out" 2>&1; fi
    rc=$?
    p=$(grep -c '^ok ' "$tmp/out"); f=$(grep -c '^FAIL ' "$tmp/out")
    if [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then f=1; echo "FAIL $name: exited with status $rc" >>"$tmp/out"; fi
    pass=$((pass + p)); fail=$((fail + f))
    echo "== $name: $p passed, $f failed ($(( $(date +%s) - start ))s)"
    if [ "$f" -ne 0 ] || [ -n "$VERBOSE" ]; then grep -v '^ok ' "$tmp/out" | head -n 60; fi
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
