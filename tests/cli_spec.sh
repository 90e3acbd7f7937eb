#!/bin/sh
# Speculative decoding from the CLI: run --spec / -md give the golden greedy continuation, report
# acceptance; bench --spec adds the gen/spec rows; bad values are errors.
. tests/lib.sh
K=$SHARED/models/kjv-moe-q8_0.gguf
want=$(tr -d ' \n' <"$SHARED/golden/kjv-moe-q8_0.greedy48.txt")

for v in "--spec" "--spec --draft-max 3 --spec-ngram 2" "-md $K --draft-max 4"; do
  name=run_spec_$(echo "$v" | tr -c 'a-z0-9' '_' | cut -c1-30)
  # shellcheck disable=SC2086
  if "$MOERUN" run -m "$K" -p "And God said" --temp 0 -n 48 --show-ids $v >"$TMPD/o" 2>"$TMPD/e" &&
     [ "$(sed -n 's/^ids: //p' "$TMPD/o")" = "$want" ] && grep -q "^speculative: .* accepted" "$TMPD/e"; then
    ok "$name"; else fail "$name" "$(sed -n 's/^ids: //p' "$TMPD/o") $(head -c 300 "$TMPD/e")"; fi
done
# a model drafting for itself: every draft is accepted
"$MOERUN" run -m "$K" -p "And God said" --temp 0 -n 48 -md "$K" >"$TMPD/o" 2>"$TMPD/e"
if grep -q "^speculative: draft-model .* (100.0%)" "$TMPD/e"; then ok run_spec_self_draft_all_accepted
else fail run_spec_self_draft_all_accepted "$(grep speculative "$TMPD/e")"; fi

if "$MOERUN" bench -m "$K" -p 0 -n 16 -r 1 -t 1 --spec >"$TMPD/o" 2>"$TMPD/e" &&
   grep -q "tg16 gen @ d64" "$TMPD/o" && grep -q "tg16 spec @ d64" "$TMPD/o" && grep -q "^tg16 spec: .* accepted" "$TMPD/e"; then
  ok bench_spec; else fail bench_spec "$(cat "$TMPD/o" "$TMPD/e" | head -c 400)"; fi

expect_err run_spec_bad_max "draft" "$MOERUN" run -m "$K" -p hi --draft-max 65
expect_err run_spec_bad_draft_model "draft model" "$MOERUN" run -m "$K" -p hi -md "$TMPD/nope.gguf"

# --spec-mtp: drafts from a deepseek4 file's own MTP block (synthesized: none accepted), same greedy ids;
# a file without the block is refused
"$MOERUN" synth --shape deepseek-v4-tiny-di64 --mix f32 --seed 2 --layout mtp -o "$TMPD/mtp.gguf" >/dev/null 2>&1
"$MOERUN" run -m "$TMPD/mtp.gguf" -p "And God said" --temp 0 -n 24 -t 1 --show-ids >"$TMPD/plain" 2>/dev/null
if "$MOERUN" run -m "$TMPD/mtp.gguf" -p "And God said" --temp 0 -n 24 -t 1 --show-ids --spec-mtp >"$TMPD/o" 2>"$TMPD/e" &&
   [ -n "$(sed -n 's/^ids: //p' "$TMPD/plain")" ] &&
   [ "$(sed -n 's/^ids: //p' "$TMPD/o")" = "$(sed -n 's/^ids: //p' "$TMPD/plain")" ] && grep -q "^speculative: MTP drafts .* drafted" "$TMPD/e"; then
  ok run_spec_mtp_same_ids; else fail run_spec_mtp_same_ids "$(head -c 300 "$TMPD/e")"; fi
expect_err run_spec_mtp_without_block "MTP block" "$MOERUN" run -m "$K" -p hi --spec-mtp
# an MTP sidecar (mainline's convert --mtp: the block without a trunk) given with -md drafts the same way
"$MOERUN" synth --shape deepseek-v4-tiny-di64 --mix f32 --seed 2 --layout trunk -o "$TMPD/trunk.gguf" >/dev/null 2>&1
"$MOERUN" synth --shape deepseek-v4-tiny-di64 --mix f32 --seed 2 --layout mtp-only -o "$TMPD/side.gguf" >/dev/null 2>&1
if "$MOERUN" run -m "$TMPD/trunk.gguf" -p "And God said" --temp 0 -n 24 -t 1 --show-ids -md "$TMPD/side.gguf" >"$TMPD/o" 2>"$TMPD/e" &&
   [ "$(sed -n 's/^ids: //p' "$TMPD/o")" = "$(sed -n 's/^ids: //p' "$TMPD/plain")" ] && grep -q "^speculative: MTP drafts .* drafted" "$TMPD/e"; then
  ok run_spec_mtp_sidecar_same_ids; else fail run_spec_mtp_sidecar_same_ids "$(head -c 300 "$TMPD/e")"; fi
expect_err run_mtp_sidecar_alone "MTP sidecar" "$MOERUN" run -m "$TMPD/side.gguf" -p hi -n 2
# a DSpark drafter (arch dflash) given with -md: block drafts from the trunk's target-layer states, same ids
"$MOERUN" synth --shape deepseek-v4-tiny-di64 --mix f32 --seed 2 --layout dspark -o "$TMPD/dspark.gguf" >/dev/null 2>&1
if "$MOERUN" run -m "$TMPD/trunk.gguf" -p "And God said" --temp 0 -n 24 -t 1 --show-ids -md "$TMPD/dspark.gguf" >"$TMPD/o" 2>"$TMPD/e" &&
   [ "$(sed -n 's/^ids: //p' "$TMPD/o")" = "$(sed -n 's/^ids: //p' "$TMPD/plain")" ] && grep -q "^speculative: DSpark drafts .* drafted" "$TMPD/e"; then
  ok run_spec_dspark_same_ids; else fail run_spec_dspark_same_ids "$(head -c 300 "$TMPD/e")"; fi
expect_err run_dspark_alone "DSpark drafter" "$MOERUN" run -m "$TMPD/dspark.gguf" -p hi -n 2
