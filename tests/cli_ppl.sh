#!/bin/sh
# moerun perplexity against the reference llama-perplexity values (shared/golden/ppl/README.md),
# KL-divergence of a run against its own saved logits, and error cases.
. tests/lib.sh
P=$SHARED/golden/ppl
M=$SHARED/models

# ppl_check NAME EXPECTED EXPECTED_ERR REL_TOL ARGS...: the "Final estimate" PPL must be within
# REL_TOL (relative) of EXPECTED, and its +/- within 1% of EXPECTED_ERR
ppl_check() {
    n=$1; want=$2; want_err=$3; tol=$4; shift 4
    if ! $MOERUN perplexity "$@" >"$TMPD/o" 2>"$TMPD/e"; then fail "$n" "exit $?: $(tail -c 300 "$TMPD/e")"; return; fi
    line=$(grep '^Final estimate: PPL = ' "$TMPD/o")
    [ -n "$line" ] || { fail "$n" "no final line: $(head -c 300 "$TMPD/o")"; return; }
    got=$(echo "$line" | awk '{print $5}'); err=$(echo "$line" | awk '{print $7}')
    if awk -v g="$got" -v w="$want" -v t="$tol" -v e="$err" -v we="$want_err" \
        'BEGIN { d = (g - w) / w; if (d < 0) d = -d; de = (e - we) / we; if (de < 0) de = -de; exit !(d <= t && de <= 0.01) }'; then
        ok "$n ($got +/- $err, reference $want +/- $want_err)"
    else
        fail "$n" "PPL $got +/- $err, reference $want +/- $want_err (relative tolerance $tol)"
    fi
}

expect_ok ppl_help $MOERUN perplexity --help
grep -q 'usage: moerun perplexity' "$TMPD/o" || fail ppl_help_text "no usage line"

# reference: llama-perplexity -c 128 -b 128, all chunks (110 / 67), and -c 256 on kjv-valid (224 chunks)
ppl_check ppl_aidreams260K 249.9631 9.04680 1e-4 -m "$M/aidreams260K.gguf" -f "$P/gpl3-head.txt" -c 128
grep -q '\[110\]2' "$TMPD/e" && ok ppl_progress_on_stderr || fail ppl_progress_on_stderr "no [110] progress entry"
ppl_check ppl_tiny_qwen3moe_q4_k_m 145069.4620 6487.96341 5e-3 -m "$M/tiny-qwen3moe-q4_k_m.gguf" -f "$P/gpl3-head.txt" -c 128
case "$MOERUN" in
*/san/*)
    # sanitizer build (make sanitize): the 224 chunks take minutes there; run 8 chunks for the memory
    # checks only; the golden comparison above runs in the normal build
    expect_ok ppl_kjv_moe_q8_0_sanitizer_8_chunks $MOERUN perplexity -m "$M/kjv-moe-q8_0.gguf" -f "$P/kjv-valid.txt" -c 256 --chunks 8
    skip ppl_kjv_moe_q8_0 "golden comparison not run in the sanitizer build (8 chunks run instead)";;
*)
    if [ -n "$MR_RUNNER" ] && [ -z "$MR_EMU_FULL" ]; then
        # under an emulator (make test-aarch64) the 224 chunks are ~16 of the suite's ~41 CPU-minutes of
        # qemu: 8 chunks run for crashes and memory; MR_EMU_FULL=1 (make test-aarch64 AARCH64_FULL=1)
        # runs the golden comparison there too
        expect_ok ppl_kjv_moe_q8_0_emulator_8_chunks $MOERUN perplexity -m "$M/kjv-moe-q8_0.gguf" -f "$P/kjv-valid.txt" -c 256 --chunks 8
        skip ppl_kjv_moe_q8_0 "golden comparison (224 chunks, ~16 CPU-minutes under $MR_RUNNER) not run under the emulator; MR_EMU_FULL=1 runs it"
    else
        ppl_check ppl_kjv_moe_q8_0 37.6972 0.63437 1e-3 -m "$M/kjv-moe-q8_0.gguf" -f "$P/kjv-valid.txt" -c 256
    fi;;
esac

# KL-divergence of a run against its own saved logits: 0, same top-1 everywhere, same PPL
A="$M/aidreams260K.gguf"
expect_ok ppl_save_logits $MOERUN perplexity -m "$A" -f "$P/gpl3-head.txt" -c 128 --chunks 6 --save-logits "$TMPD/base.mrpl"
base_line=$(grep '^Final estimate' "$TMPD/o")
# 6 chunks x 63 scored rows x 512 floats + targets + header
sz=$(wc -c <"$TMPD/base.mrpl")
[ "$sz" -eq $((24 + 6 * 63 * 4 + 6 * 63 * 512 * 4)) ] && ok ppl_save_logits_size || fail ppl_save_logits_size "$sz bytes"
expect_ok ppl_kl_self $MOERUN perplexity -m "$A" -f "$P/gpl3-head.txt" -c 128 --chunks 6 --kl-base "$TMPD/base.mrpl"
if grep -q '^KL-divergence     : mean 0, median 0, p99 0, max 0$' "$TMPD/o" && grep -q '^Same top-1 token  : 100.000%$' "$TMPD/o" &&
   grep -q '^Top-1 in top-3    : 100.000% ' "$TMPD/o" && grep -q '^Cosine similarity : mean 1.000000 ' "$TMPD/o" &&
   grep -q '^Top-10 KL         : mean 0 ' "$TMPD/o" &&
   [ "$(grep '^Final estimate' "$TMPD/o")" = "$base_line" ]; then ok ppl_kl_self_zero; else fail ppl_kl_self_zero "$(cat "$TMPD/o")"; fi
# token by token (-b 1) and in pieces of 5 (-b 5): the same logits as one batch per half
for b in 1 5; do
    expect_ok ppl_kl_batch_$b $MOERUN perplexity -m "$A" -f "$P/gpl3-head.txt" -c 128 --chunks 2 -b $b --kl-base "$TMPD/base.mrpl"
    grep -q '^KL-divergence     : mean 0, median 0, p99 0, max 0$' "$TMPD/o" && ok ppl_kl_batch_${b}_zero || fail ppl_kl_batch_${b}_zero "$(cat "$TMPD/o")"
done
# the same model with an F32 KV cache against that baseline (F16 cache): small but non-zero KL
expect_ok ppl_kl_kv_f32 $MOERUN perplexity -m "$A" -f "$P/gpl3-head.txt" -c 128 --chunks 6 --kl-base "$TMPD/base.mrpl" --kv-f32
kl=$(awk '/^KL-divergence/ {print $4}' "$TMPD/o" | tr -d ,)
awk -v k="$kl" 'BEGIN { exit !(k > 0 && k < 1e-3) }' && ok "ppl_kl_kv_f32_small ($kl)" || fail ppl_kl_kv_f32_small "KL mean '$kl'"

# errors
expect_err ppl_no_model "-m MODEL is required" $MOERUN perplexity -f "$P/gpl3-head.txt"
expect_err ppl_no_text "exactly one of" $MOERUN perplexity -m "$A"
expect_err ppl_missing_text "cannot read" $MOERUN perplexity -m "$A" -f /nonexistent.txt
expect_err ppl_too_short "need at least 16384 tokens" $MOERUN perplexity -m "$A" -f "$P/gpl3-head.txt" -c 8192
expect_err ppl_kl_mismatch "context 128" $MOERUN perplexity -m "$A" -f "$P/gpl3-head.txt" -c 64 --chunks 2 --kl-base "$TMPD/base.mrpl"
expect_err ppl_kl_not_mrpl "not a moerun saved-logits file" $MOERUN perplexity -m "$A" -f "$P/gpl3-head.txt" -c 128 --chunks 2 --kl-base "$P/gpl3-head.txt"
head -c 5000 "$TMPD/base.mrpl" >"$TMPD/trunc.mrpl"
expect_err ppl_kl_truncated "truncated" $MOERUN perplexity -m "$A" -f "$P/gpl3-head.txt" -c 128 --chunks 2 --kl-base "$TMPD/trunc.mrpl"
expect_err ppl_bad_ctx "bad value" $MOERUN perplexity -m "$A" -f "$P/gpl3-head.txt" -c abc
