#!/bin/sh
# moerun quant-check: every golden quant file, on every ISA this CPU has; malformed files rejected.
# The IQ/FP4 types (src/quant/quant_ref_iq.c) fail here until their kernels land.
. tests/lib.sh
Q=$SHARED/golden/quants

expect_ok quant_check_help $MOERUN quant-check --help
grep -q 'usage: moerun quant-check' "$TMPD/o" || fail quant_check_help_text "no usage line"

for f in "$Q"/*.bin; do
    t=$(basename "$f" .bin)
    if $MOERUN quant-check --isa all "$f" >"$TMPD/o" 2>"$TMPD/e"; then
        n=$(grep -c ' PASS$' "$TMPD/o")
        if [ "$n" -ge 1 ] && ! grep -q FAIL "$TMPD/o"; then ok "quant_check_$t"; else fail "quant_check_$t" "$(grep FAIL "$TMPD/o" | head -n 1)"; fi
    else
        fail "quant_check_$t" "$(grep -h "FAIL\|error" "$TMPD/o" "$TMPD/e" | head -n 1)"
    fi
done

# several files in one call: one line each, exit status 0 only if all pass
expect_ok quant_check_multi $MOERUN quant-check --isa scalar "$Q/q8_0.bin" "$Q/q4_K.bin"
[ "$(grep -c PASS "$TMPD/o")" -eq 2 ] && ok quant_check_multi_lines || fail quant_check_multi_lines "$(cat "$TMPD/o")"

# malformed golden files: truncated, bad magic, header inconsistent with the size
head -c 1000 "$Q/q4_0.bin" >"$TMPD/trunc.bin"
expect_err quant_check_truncated "header implies" $MOERUN quant-check "$TMPD/trunc.bin"
{ printf 'XGLD'; tail -c +5 "$Q/q4_0.bin"; } >"$TMPD/magic.bin"
expect_err quant_check_bad_magic "bad magic" $MOERUN quant-check "$TMPD/magic.bin"
{ head -c 12 "$Q/q4_0.bin"; printf '\377\377\377\177'; tail -c +17 "$Q/q4_0.bin"; } >"$TMPD/rows.bin"
expect_err quant_check_huge_rows "out of range" $MOERUN quant-check "$TMPD/rows.bin"
# a flipped weight byte: well-formed, but the check must fail (exit 1, FAIL line)
{ head -c 40 "$Q/q8_0.bin"; printf '\177'; tail -c +42 "$Q/q8_0.bin"; } >"$TMPD/flip.bin"
$MOERUN quant-check --isa scalar "$TMPD/flip.bin" >"$TMPD/o" 2>"$TMPD/e"
rc=$?
if [ $rc -eq 1 ] && grep -q 'FAIL$' "$TMPD/o"; then ok quant_check_detects_corruption; else fail quant_check_detects_corruption "rc=$rc $(cat "$TMPD/o")"; fi
expect_err quant_check_missing "cannot open" $MOERUN quant-check /nonexistent.bin
expect_err quant_check_no_files "no golden file" $MOERUN quant-check
expect_err quant_check_bad_isa "unknown --isa" $MOERUN quant-check --isa sse9 "$Q/q8_0.bin"
