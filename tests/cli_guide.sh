#!/bin/sh
# docs/GUIDE.md cannot rot: every ```sh block after a "<!-- guide-test -->" line is run, in order, in
# one scratch directory (build/ linked to this build). By default the guide's DeepSeek-V4-Flash-width
# model is swapped for the tiny deepseek4 shape and blocks marked "guide-test full" (npm) are left
# out; GUIDE_FULL=1 runs everything as written. Port 8080 becomes a free port; a block that starts
# the server waits until it answers. Each block must exit 0; the curl reply must be a chat completion
# and plan's report must have its prediction lines.
. tests/lib.sh
GUIDE=${GUIDE:-docs/GUIDE.md}
ROOT=$(pwd)
BUILD_DIR=$(cd "$(dirname "$MOERUN")/.." && pwd)/$(basename "$(dirname "$MOERUN")")
mkdir -p "$TMPD/run" && ln -s "$BUILD_DIR" "$TMPD/run/build"
PORT=$((20000 + ($$ * 7 + 911) % 20000))
# blocks -> $TMPD/blockN.sh
awk -v full="${GUIDE_FULL:-0}" -v dir="$TMPD" '
  /^<!-- guide-test( full)? -->$/ { want = ($0 ~ /full/) ? (full == "1") : 1; armed = 1; next }
  armed && /^```sh$/ { if (want) { n++; out = dir "/block" n ".sh" } inblk = 1; armed = 0; next }
  inblk && /^```$/ { inblk = 0; out = ""; next }
  inblk && out != "" { print > out }
  END { print n + 0 > (dir "/nblocks") }' "$GUIDE"
N=$(cat "$TMPD/nblocks")
[ "$N" -ge 5 ] || { fail guide_blocks "only $N tested blocks in $GUIDE"; exit 1; }
ok guide_blocks
for i in $(seq 1 "$N"); do
  b=$TMPD/block$i.sh
  sed -i "s/8080/$PORT/g" "$b"
  [ "${GUIDE_FULL:-0}" = 1 ] || sed -i 's/--shape deepseek-v4-flash --layers 1/--shape deepseek-v4-tiny/' "$b"
  # a background server: remember its pid, wait for /health
  if grep -q ' server .*&$' "$b"; then sed -i 's/&$/\& echo $! >"$SRVPID"/' "$b"; srv=1; else srv=0; fi
  (cd "$TMPD/run" && SRVPID=$TMPD/srv.pid sh -e "$b") >"$TMPD/out$i" 2>"$TMPD/err$i" </dev/null; rc=$?
  if [ $srv = 1 ]; then
    up=0
    for _ in $(seq 1 300); do
      curl -s "http://127.0.0.1:$PORT/health" 2>/dev/null | grep -q '"ok"' && { up=1; break; }
      sleep 0.1
    done
    [ $up = 1 ] || rc=99
  fi
  first=$(grep -v '^ *$' "$b" | head -1 | cut -c1-60)
  if [ $rc -ne 0 ]; then fail "guide_block$i" "rc $rc: $first: $(head -c 300 "$TMPD/err$i")"; continue; fi
  case "$first" in
    curl*) grep -q '"chat.completion"' "$TMPD/out$i" && ok "guide_block$i" || fail "guide_block$i" "not a completion: $(head -c 200 "$TMPD/out$i")" ;;
    *" plan "*) grep -q '^predicted tok/s' "$TMPD/out$i" && grep -q '^  resident' "$TMPD/out$i" && ok "guide_block$i" ||
                fail "guide_block$i" "no prediction: $(head -c 300 "$TMPD/out$i")" ;;
    *) ok "guide_block$i" ;;
  esac
done
[ -f "$TMPD/srv.pid" ] && { kill "$(cat "$TMPD/srv.pid")" 2>/dev/null; wait 2>/dev/null; }
cd "$ROOT" || exit 1
