#!/bin/sh
# MoE approximation options (docs/APPROX.md): off or keep-all settings reproduce the exact greedy
# text and perplexity logits; pruning reports fewer experts per token; chat's /approx switches them
# while running; bad values are errors.
. tests/lib.sh
K=$SHARED/models/kjv-moe-q8_0.gguf
T=$SHARED/golden/ppl/kjv-valid.txt
G=$(tr -d ' \n' <"$SHARED/golden/kjv-moe-q8_0.greedy48.txt")

# a pruning threshold that keeps every expert runs the approximate path and stays exact
if "$MOERUN" run -m "$K" -p "And God said" --temp 0 -n 48 --show-ids --moe-approx "tau=0.000001 skip_abs=1e-30" >"$TMPD/o" 2>"$TMPD/e" &&
   [ "$(sed -n 's/^ids: //p' "$TMPD/o")" = "$G" ] && grep -q "^moe approx: .*experts/token 4.000 of 4.*rows skipped 0.0%" "$TMPD/e"; then
  ok approx_run_keepall_exact; else fail approx_run_keepall_exact "$(head -c 400 "$TMPD/e")"; fi

# pruning: fewer experts per token, reported
if "$MOERUN" run -m "$K" -p "And God said" --temp 0 -n 16 --moe-prune 0.8 >"$TMPD/o" 2>"$TMPD/e" &&
   grep -q "^moe approx: prune=0.8 .*experts/token [23]\.[0-9]* of 4" "$TMPD/e"; then
  ok approx_run_prune_report; else fail approx_run_prune_report "$(head -c 400 "$TMPD/e")"; fi

# perplexity: the exact baseline vs a no-op setting (KL 0) and vs pruning + skipping (KL > 0)
"$MOERUN" perplexity -m "$K" -f "$T" -c 128 --chunks 2 --save-logits "$TMPD/base.bin" >/dev/null 2>&1
"$MOERUN" perplexity -m "$K" -f "$T" -c 128 --chunks 2 --kl-base "$TMPD/base.bin" --moe-approx "prune=0.99999 skip_abs=1e-30" >"$TMPD/o" 2>"$TMPD/e"
if grep -q "^KL-divergence *: mean 0, median 0, p99 0, max 0" "$TMPD/o" && grep -q "^Same top-1 token *: 100.000%" "$TMPD/o"; then
  ok approx_ppl_noop_exact; else fail approx_ppl_noop_exact "$(cat "$TMPD/o") $(head -c 300 "$TMPD/e")"; fi
"$MOERUN" perplexity -m "$K" -f "$T" -c 128 --chunks 2 --kl-base "$TMPD/base.bin" --moe-prune 0.8 --moe-skip 0.05 >"$TMPD/o" 2>"$TMPD/e"
if grep -q "^KL-divergence *: mean 0\.0*[1-9]" "$TMPD/o" && grep -q "^moe approx: prune=0.8 .*skip=0.05.*rows skipped [1-9]" "$TMPD/o"; then
  ok approx_ppl_kl; else fail approx_ppl_kl "$(cat "$TMPD/o") $(head -c 300 "$TMPD/e")"; fi
# the other measures of the same run: cosine below 1, top-3 agreement at least top-1, 0 < top-10 KL <= KL
if awk '/^KL-divergence/ {kl = $4 + 0} /^Same top-1/ {t1 = $5 + 0} /^Top-1 in top-3/ {t3 = $5 + 0}
        /^Cosine similarity/ {cs = $5 + 0} /^Top-10 KL/ {k10 = $5 + 0}
        END { exit !(cs > 0.9 && cs < 1 && t3 >= t1 && t3 < 100 && k10 > 0 && k10 <= kl) }' "$TMPD/o"; then
  ok approx_ppl_measures; else fail approx_ppl_measures "$(cat "$TMPD/o")"; fi

# chat: /approx before the first message == the same setting from the command line; /approx off == exact
printf 'Let there be light\n/exit\n' | "$MOERUN" chat -m "$K" --temp 0 -n 16 --moe-prune 0.6 >"$TMPD/c1" 2>/dev/null
printf '/approx prune=0.6\nLet there be light\n/exit\n' | "$MOERUN" chat -m "$K" --temp 0 -n 16 >"$TMPD/c2" 2>"$TMPD/e2"
printf 'Let there be light\n/exit\n' | "$MOERUN" chat -m "$K" --temp 0 -n 16 >"$TMPD/c3" 2>/dev/null
printf '/approx prune=0.6 skip=0.2\n/approx off\nLet there be light\n/exit\n' | "$MOERUN" chat -m "$K" --temp 0 -n 16 >"$TMPD/c4" 2>/dev/null
for f in c1 c2 c3 c4; do sed 's/> //g' "$TMPD/$f" | grep -v '^$' >"$TMPD/$f.t"; done  # the prompts "> " differ
if [ -s "$TMPD/c1.t" ] && cmp -s "$TMPD/c1.t" "$TMPD/c2.t" && grep -q "^moe approx: prune=0.6" "$TMPD/e2"; then ok approx_chat_command; else
  fail approx_chat_command "$(head -c 300 "$TMPD/e2") / $(head -c 200 "$TMPD/c1") / $(head -c 200 "$TMPD/c2")"; fi
if [ -s "$TMPD/c3.t" ] && cmp -s "$TMPD/c3.t" "$TMPD/c4.t" && ! cmp -s "$TMPD/c1.t" "$TMPD/c3.t"; then ok approx_chat_off_exact; else fail approx_chat_off_exact "$(head -c 200 "$TMPD/c3") / $(head -c 200 "$TMPD/c4")"; fi
printf '/approx prune=2\n/approx bogus=1\n/exit\n' | "$MOERUN" chat -m "$K" >"$TMPD/o" 2>"$TMPD/e"
if [ "$(grep -c '^error: approx' "$TMPD/e")" -eq 2 ]; then ok approx_chat_bad; else fail approx_chat_bad "$(head -c 300 "$TMPD/e")"; fi

# --moe-approx-file (run, chat): the file's setting equals the same spec given on the command line;
# it is the whole setting (over --moe-approx); a bad file is reported once and changes nothing
F=$TMPD/approx.txt
ids_of() { sed -n 's/^ids: //p' "$1"; }
printf 'k=1   # one expert\n' >"$F"
"$MOERUN" run -m "$K" -p "And God said" --temp 0 -n 16 --show-ids --moe-approx k=1 >"$TMPD/k1" 2>/dev/null
"$MOERUN" run -m "$K" -p "And God said" --temp 0 -n 16 --show-ids --moe-approx-file "$F" >"$TMPD/f1" 2>"$TMPD/e"
if [ -n "$(ids_of "$TMPD/k1")" ] && [ "$(ids_of "$TMPD/k1")" = "$(ids_of "$TMPD/f1")" ] && [ "$(ids_of "$TMPD/k1")" != "$(echo "$G" | cut -d, -f1-16)" ] &&
   grep -q "^moe approx ($F): .*k=1" "$TMPD/e"; then ok approx_file_run; else fail approx_file_run "$(head -c 300 "$TMPD/e")"; fi
printf 'off\n' >"$F"
"$MOERUN" run -m "$K" -p "And God said" --temp 0 -n 48 --show-ids --moe-approx k=1 --moe-approx-file "$F" >"$TMPD/f2" 2>"$TMPD/e"
[ "$(ids_of "$TMPD/f2")" = "$G" ] && ok approx_file_overrides_flag || fail approx_file_overrides_flag "$(head -c 300 "$TMPD/e")"
printf 'k=banana\n' >"$F"
"$MOERUN" run -m "$K" -p "And God said" --temp 0 -n 48 --show-ids --moe-approx-file "$F" >"$TMPD/f3" 2>"$TMPD/e"
if [ "$(ids_of "$TMPD/f3")" = "$G" ] && [ "$(grep -c "^warning: approx file $F: .*banana" "$TMPD/e")" = 1 ]; then ok approx_file_bad_once
else fail approx_file_bad_once "$(head -c 300 "$TMPD/e")"; fi
head -c 5000 /dev/zero | tr '\0' k >"$F"
"$MOERUN" run -m "$K" -p "And God said" --temp 0 -n 4 --moe-approx-file "$F" >/dev/null 2>"$TMPD/e"
grep -q "^warning: approx file .*5000 bytes, at most 4096" "$TMPD/e" && ok approx_file_too_big || fail approx_file_too_big "$(head -c 300 "$TMPD/e")"
# chat: the file rewritten between two turns (once the first reply is out) == /approx between them
rm -f "$F"
printf 'Let there be light\n/approx k=1\nAnd the earth\n/exit\n' | "$MOERUN" chat -m "$K" --temp 0 -n 12 >"$TMPD/ca" 2>/dev/null
{ printf 'Let there be light\n'
  for i in $(seq 1 300); do grep -q 'generated' "$TMPD/cbe" 2>/dev/null && break; sleep 0.05; done
  printf 'k=1\n' >"$F.tmp" && mv "$F.tmp" "$F"
  printf 'And the earth\n/exit\n'; } | "$MOERUN" chat -m "$K" --temp 0 -n 12 --moe-approx-file "$F" >"$TMPD/cb" 2>"$TMPD/cbe"
printf 'Let there be light\nAnd the earth\n/exit\n' | "$MOERUN" chat -m "$K" --temp 0 -n 12 >"$TMPD/cc" 2>/dev/null
for f in ca cb cc; do sed 's/> //g' "$TMPD/$f" | grep -v '^$' >"$TMPD/$f.t"; done
if [ -s "$TMPD/ca.t" ] && cmp -s "$TMPD/ca.t" "$TMPD/cb.t" && ! cmp -s "$TMPD/ca.t" "$TMPD/cc.t" && grep -q "^moe approx ($F): .*k=1" "$TMPD/cbe"; then
  ok approx_file_chat_between_turns; else fail approx_file_chat_between_turns "$(cat "$TMPD/ca.t") / $(cat "$TMPD/cb.t") / $(head -c 300 "$TMPD/cbe")"; fi

# bench reports the setting and its counters
if "$MOERUN" bench -m "$K" -p 16 -n 4 -r 1 --moe-approx "prune=0.9 skip=0.05" >"$TMPD/o" 2>"$TMPD/e" &&
   grep -q "^moe approx: prune=0.9 .*experts/token" "$TMPD/e"; then ok approx_bench; else fail approx_bench "$(head -c 300 "$TMPD/e")"; fi

expect_err approx_bad_prune "prune=1.5 must be in" "$MOERUN" run -m "$K" -p x --moe-prune 1.5
expect_err approx_bad_skip "skip=-1 must be in" "$MOERUN" perplexity -m "$K" -f "$T" --moe-skip -1
expect_err approx_bad_key "unknown key" "$MOERUN" bench -m "$K" --moe-approx "prune=0.9 fast=1"
expect_err approx_missing "needs a value" "$MOERUN" server -m "$K" --moe-tau

# the row budget: 128 of 128 rows is the exact greedy text (through the skipping path), the dense
# FFN budget reports its own counter on a dense model (aidreams260K: n_ff 172 -> 25.0% at 96), and
# rows= with skip= is refused
if "$MOERUN" run -m "$K" -p "And God said" --temp 0 -n 48 --show-ids --moe-approx "rows=128" >"$TMPD/o" 2>"$TMPD/e" &&
   [ "$(sed -n 's/^ids: //p' "$TMPD/o")" = "$G" ] && grep -q "^moe approx: .*rows=128: .*rows skipped 0.0%" "$TMPD/e"; then
  ok approx_rows128_exact; else fail approx_rows128_exact "$(head -c 400 "$TMPD/e")"; fi
A=$SHARED/models/aidreams260K.gguf
if "$MOERUN" run -m "$A" -p "I dreamed" --temp 0 -n 8 --moe-approx "rows_dense=96" >"$TMPD/o" 2>"$TMPD/e" &&
   grep -q "^moe approx: .*rows_dense=96: shared/dense FFN rows skipped 25.0%" "$TMPD/e"; then
  ok approx_rows_dense_report; else fail approx_rows_dense_report "$(head -c 400 "$TMPD/e")"; fi
expect_err approx_rows_with_skip "two rules" "$MOERUN" run -m "$K" -p x --moe-approx "rows=96 skip=0.05"
expect_err approx_rows_range "rows=129 must be an integer" "$MOERUN" run -m "$K" -p x --moe-approx "rows=129"
