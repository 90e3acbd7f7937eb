# Helpers for tests/cli_*.sh: each check prints "ok NAME" or "FAIL NAME: why" (or "skip NAME: why"
# for a check that cannot hold in this build; run.sh counts it apart).
MOERUN=${MOERUN:-build/moerun}
SHARED=${MR_SHARED:-../shared}
TMPD=$(mktemp -d); trap 'rm -rf "$TMPD"' EXIT
ok()   { echo "ok $1"; }
fail() { echo "FAIL $1: $2"; }
skip() { echo "skip $1: $2"; }
# expect_ok NAME CMD...: command must exit 0
expect_ok() { n=$1; shift; if "$@" >"$TMPD/o" 2>"$TMPD/e"; then ok "$n"; else fail "$n" "exit $? : $(head -c 300 "$TMPD/e")"; fi; }
# expect_err NAME PATTERN CMD...: command must exit 1 and print 'error: ...PATTERN' on stderr
expect_err() { n=$1; pat=$2; shift 2; "$@" >"$TMPD/o" 2>"$TMPD/e"; rc=$?
  if [ $rc -eq 1 ] && grep -q "^error: .*$pat" "$TMPD/e"; then ok "$n"; else fail "$n" "rc=$rc stderr=$(head -c 300 "$TMPD/e")"; fi; }
