#!/bin/sh
# MoE approximations switched while the server runs (docs/APPROX.md "Switching while running"):
# POST /v1/admin/moe and the control file change the greedy text of the next request and change it
# back to the exact text, with the model loaded once and the prompt cache kept (cached_tokens); the
# endpoint needs the admin key; a bad control file is reported once and the setting stays; every
# reply names the active setting (body and header).
. tests/lib.sh
K=$SHARED/models/kjv-moe-q8_0.gguf
if ! command -v curl >/dev/null 2>&1; then fail server_approx_curl "curl is not installed"; exit 1; fi
F=$TMPD/approx.txt
SRV=
trap 'if [ -n "$SRV" ]; then kill $SRV 2>/dev/null; fi; rm -rf "$TMPD"' EXIT

# a port from the process id; another one if it is taken (the server then exits at once)
up=0
for try in 1 2 3 4 5; do
  PORT=$((21000 + ($$ * 13 + try * 977) % 18000))
  "$MOERUN" server -m "$K" --port $PORT -t 1 --admin-key adm1n --moe-approx-file "$F" >"$TMPD/srv.out" 2>"$TMPD/srv.err" &
  SRV=$!
  for i in $(seq 1 100); do
    if curl -s "http://127.0.0.1:$PORT/health" 2>/dev/null | grep -q '"ok"'; then up=1; break; fi
    kill -0 $SRV 2>/dev/null || break
    sleep 0.1
  done
  [ $up -eq 1 ] && break
  kill $SRV 2>/dev/null; wait $SRV 2>/dev/null; SRV=
done
if [ $up -eq 1 ]; then ok server_approx_up; else fail server_approx_up "$(head -c 300 "$TMPD/srv.err")"; exit 1; fi
U=http://127.0.0.1:$PORT
# complete NAME: one greedy completion of the same prompt; text in $TMPD/NAME.txt, body in $TMPD/NAME.json
complete() {
  curl -s -D "$TMPD/$1.hdr" -o "$TMPD/$1.json" "$U/v1/completions" -d '{"prompt":"And God said","max_tokens":24,"temperature":0}'
  t=$(sed -n 's/.*"text":"\([^"]*\)".*/\1/p' "$TMPD/$1.json")
  printf '%s\n' "$t" >"$TMPD/$1.txt"
}
admin() { curl -s -o "$TMPD/admin.json" -w '%{http_code}' -H 'Authorization: Bearer adm1n' "$U/v1/admin/moe" "$@"; }
# set_file TEXT: the control file written atomically (a temporary file renamed over it)
set_file() { printf '%s\n' "$1" >"$F.tmp" && mv "$F.tmp" "$F"; }

"$MOERUN" run -m "$K" -p "And God said" --temp 0 -n 24 -t 1 2>/dev/null | sed 's/^And God said//' >"$TMPD/want.txt"

# the exact model first; the reply names the setting ("off")
complete r1
if cmp -s "$TMPD/r1.txt" "$TMPD/want.txt" && grep -q '"moerun":{"approx":"off"}' "$TMPD/r1.json" &&
   grep -qi '^X-Moerun-Approx: off' "$TMPD/r1.hdr"; then ok server_approx_exact_first
else fail server_approx_exact_first "$(cat "$TMPD/r1.txt") / $(cat "$TMPD/want.txt") / $(head -c 400 "$TMPD/r1.json")"; fi

# unauthorised: no key, a wrong key, the key in x-api-key works
c1=$(curl -s -o "$TMPD/e1" -w '%{http_code}' "$U/v1/admin/moe" -d '{"approx":"k=1"}')
c2=$(curl -s -o "$TMPD/e2" -w '%{http_code}' -H 'Authorization: Bearer nope' "$U/v1/admin/moe" -d '{"k":1}')
c3=$(curl -s -o "$TMPD/e3" -w '%{http_code}' -H 'x-api-key: adm1n' "$U/v1/admin/moe")
if [ "$c1" = 401 ] && [ "$c2" = 401 ] && [ "$c3" = 200 ] && grep -q '"type":"authentication_error"' "$TMPD/e1" &&
   grep -q 'admin key' "$TMPD/e2" && grep -q '"approx":"off"' "$TMPD/e3"; then ok server_approx_admin_key
else fail server_approx_admin_key "$c1 $c2 $c3 $(cat "$TMPD/e1") $(cat "$TMPD/e3")"; fi
complete r1b
cmp -s "$TMPD/r1b.txt" "$TMPD/want.txt" && ok server_approx_refused_changes_nothing || fail server_approx_refused_changes_nothing "$(cat "$TMPD/r1b.txt")"

# bad values: 400 naming the problem, nothing changes
b1=$(admin -d '{"approx":5}'); b2=$(admin -d '{"bogus":1}'); b3=$(admin -d '{"layers":"1- k=2"}'); b4=$(admin -d '{"k":-3}')
b5=$(admin -d '[1]')
if [ "$b1$b2$b3$b4$b5" = 400400400400400 ]; then ok server_approx_bad_values; else fail server_approx_bad_values "$b1 $b2 $b3 $b4 $b5 $(cat "$TMPD/admin.json")"; fi

# through the endpoint: k=1 changes the text; the prompt's first tokens still come from the cache
code=$(admin -d '{"approx":"k=1"}')
if [ "$code" = 200 ] && grep -q '"approx":"[^"]*k=1[^"]*"' "$TMPD/admin.json"; then ok server_approx_post; else fail server_approx_post "$code $(cat "$TMPD/admin.json")"; fi
complete r2
if [ -s "$TMPD/r2.txt" ] && ! cmp -s "$TMPD/r2.txt" "$TMPD/want.txt" && grep -q '"cached_tokens":3' "$TMPD/r2.json" &&
   grep -q '"moerun":{"approx":"[^"]*k=1[^"]*"}' "$TMPD/r2.json" && grep -qi '^X-Moerun-Approx: .*k=1' "$TMPD/r2.hdr"; then
  ok server_approx_post_changes_output
else fail server_approx_post_changes_output "$(cat "$TMPD/r2.txt") / $(head -c 500 "$TMPD/r2.json")"; fi
# the individual keys (merged into the current setting), then back to exact
code=$(admin -d '{"k":2,"layers":"1-","rescale":"l1","rows":96}')
if [ "$code" = 200 ] && grep -q 'rescale=l1 k=2 layers=1-' "$TMPD/admin.json" && grep -q ' rows=96' "$TMPD/admin.json"; then ok server_approx_post_keys; else fail server_approx_post_keys "$code $(cat "$TMPD/admin.json")"; fi
code=$(admin -d '{"approx":"off"}')
complete r3
if [ "$code" = 200 ] && cmp -s "$TMPD/r3.txt" "$TMPD/want.txt" && grep -q '"cached_tokens":3' "$TMPD/r3.json" &&
   grep -q '"moerun":{"approx":"off"}' "$TMPD/r3.json"; then ok server_approx_post_back_to_exact
else fail server_approx_post_back_to_exact "$(cat "$TMPD/r3.txt") / $(head -c 400 "$TMPD/r3.json")"; fi

# through the control file: the same k=1 text as through the endpoint, then exact again
set_file "k=1   # as the endpoint's"
complete r4
if cmp -s "$TMPD/r4.txt" "$TMPD/r2.txt" && grep -q '"cached_tokens":3' "$TMPD/r4.json" &&
   grep -q '"moerun":{"approx":"[^"]*k=1[^"]*"}' "$TMPD/r4.json"; then ok server_approx_file_changes_output
else fail server_approx_file_changes_output "$(cat "$TMPD/r4.txt") / $(cat "$TMPD/r2.txt") / $(head -c 300 "$TMPD/srv.err")"; fi
set_file "off"
complete r5
if cmp -s "$TMPD/r5.txt" "$TMPD/want.txt" && grep -q '"cached_tokens":3' "$TMPD/r5.json"; then ok server_approx_file_back_to_exact
else fail server_approx_file_back_to_exact "$(cat "$TMPD/r5.txt")"; fi
# a bad file: reported once on stderr, the setting stays (exact)
set_file "k=banana"
complete r6
complete r7
n=$(grep -c 'warning: approx file .*banana' "$TMPD/srv.err")
if [ "$n" = 1 ] && cmp -s "$TMPD/r6.txt" "$TMPD/want.txt" && cmp -s "$TMPD/r7.txt" "$TMPD/want.txt"; then ok server_approx_file_bad_once
else fail server_approx_file_bad_once "$n warnings; $(cat "$TMPD/r6.txt")"; fi
# the file holds the whole setting: "k=1" after the endpoint set rescale=l1 gives exactly k=1
admin -d '{"approx":"rescale=l1"}' >/dev/null
set_file "k=1"
complete r8
code=$(admin)
if cmp -s "$TMPD/r8.txt" "$TMPD/r2.txt" && [ "$code" = 200 ] && grep -q 'rescale=l2 k=1' "$TMPD/admin.json"; then ok server_approx_file_whole_setting
else fail server_approx_file_whole_setting "$(cat "$TMPD/admin.json") / $(cat "$TMPD/r8.txt")"; fi

# streams and the Anthropic API name the setting too
curl -s -D "$TMPD/s.hdr" "$U/v1/chat/completions" -d '{"messages":[{"role":"user","content":"Who made the heaven?"}],"max_tokens":4,"stream":true,"stream_options":{"include_usage":true}}' >"$TMPD/s.sse"
if grep -qi '^X-Moerun-Approx: .*k=1' "$TMPD/s.hdr" && grep -q '"finish_reason":"[a-z_]*"}\],.*"moerun":{"approx":"[^"]*k=1' "$TMPD/s.sse" &&
   grep -q '"usage":{.*"moerun":{"approx"' "$TMPD/s.sse"; then ok server_approx_stream_metadata
else fail server_approx_stream_metadata "$(head -c 600 "$TMPD/s.sse")"; fi
curl -s "$U/v1/messages" -d '{"model":"x","max_tokens":4,"messages":[{"role":"user","content":"Who made the heaven?"}]}' >"$TMPD/a.json"
curl -s "$U/v1/messages" -d '{"model":"x","max_tokens":4,"stream":true,"messages":[{"role":"user","content":"Who made the heaven?"}]}' >"$TMPD/a.sse"
if grep -q '"moerun":{"approx":"[^"]*k=1' "$TMPD/a.json" && grep -q '^data: {"type":"message_start".*"moerun":{"approx"' "$TMPD/a.sse" &&
   grep -q '^data: {"type":"message_delta".*"moerun":{"approx"' "$TMPD/a.sse"; then ok server_approx_anthropic_metadata
else fail server_approx_anthropic_metadata "$(head -c 300 "$TMPD/a.json") / $(head -c 600 "$TMPD/a.sse")"; fi

curl -s "$U/props" >"$TMPD/props.json"
grep -q '"build":"[^"]*","moerun":{"approx":"[^"]*k=1' "$TMPD/props.json" && ok server_approx_props || fail server_approx_props "$(cat "$TMPD/props.json")"

# one model load for all of it
n=$(grep -c '^listening on' "$TMPD/srv.err")
[ "$n" = 1 ] && ok server_approx_no_reload || fail server_approx_no_reload "$n start lines: $(head -c 300 "$TMPD/srv.err")"
kill $SRV; wait $SRV 2>/dev/null; SRV=

# a server with neither an admin key nor an API key refuses the endpoint (403)
for try in 1 2 3 4 5; do
  PORT=$((21000 + ($$ * 17 + try * 1231) % 18000))
  "$MOERUN" server -m "$K" --port $PORT -t 1 >/dev/null 2>"$TMPD/srv2.err" &
  SRV=$!
  up=0
  for i in $(seq 1 100); do
    if curl -s "http://127.0.0.1:$PORT/health" 2>/dev/null | grep -q '"ok"'; then up=1; break; fi
    kill -0 $SRV 2>/dev/null || break
    sleep 0.1
  done
  [ $up -eq 1 ] && break
  kill $SRV 2>/dev/null; wait $SRV 2>/dev/null; SRV=
done
c=$(curl -s -o "$TMPD/e4" -w '%{http_code}' "http://127.0.0.1:$PORT/v1/admin/moe" -d '{"k":1}')
if [ "$c" = 403 ] && grep -q 'admin-key' "$TMPD/e4"; then ok server_approx_disabled_403; else fail server_approx_disabled_403 "$c $(cat "$TMPD/e4")"; fi
