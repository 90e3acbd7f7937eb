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
# server_start MODEL TEMPLATE: `moerun server` on a free port ($PORT, $SRV; stderr in $TMPD/srv.err),
# waiting until it answers; exits the script with a FAIL when it does not start
server_start() {
  up=0
  for try in 1 2 3; do
    PORT=$((20000 + ($$ * 13 + 3571 * try + ${#1}) % 20000))
    "$MOERUN" server -m "$1" --chat-template "$2" --port $PORT -t 1 -c 2048 >/dev/null 2>"$TMPD/srv.err" &
    SRV=$!
    for _ in $(seq 1 150); do
      if grep -q '^listening' "$TMPD/srv.err" && curl -s "http://127.0.0.1:$PORT/health" 2>/dev/null | grep -q '"ok"'; then up=1; break; fi
      kill -0 $SRV 2>/dev/null || break
      sleep 0.1
    done
    [ $up -eq 1 ] && return 0
    kill $SRV 2>/dev/null; wait $SRV 2>/dev/null
    grep -q "cannot listen" "$TMPD/srv.err" || break
  done
  fail server_start "server did not start: $(head -c 300 "$TMPD/srv.err")"
  exit 1
}
