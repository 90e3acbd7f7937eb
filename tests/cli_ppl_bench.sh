#!/bin/sh
# moerun bench (output formats, depth, profile table) and run --profile, on the small kjv-moe model.
. tests/lib.sh
K=$SHARED/models/kjv-moe-q8_0.gguf

expect_ok bench_help $MOERUN bench --help
grep -q 'usage: moerun bench' "$TMPD/o" || fail bench_help_text "no usage line"

# markdown: a header and one row per test with a positive mean
expect_ok bench_md $MOERUN bench -m "$K" -p 32 -n 8 -r 2 -t 2
if grep -q '^| model | arch | size | threads | test | t/s |$' "$TMPD/o" &&
   grep -q '^| kjv-moe-q8_0.gguf | qwen3moe | 0.03 GiB | 2 | pp32 | [0-9.]* ± [0-9.]* |$' "$TMPD/o" &&
   grep -q '^| kjv-moe-q8_0.gguf | qwen3moe | 0.03 GiB | 2 | tg8 | [0-9.]* ± [0-9.]* |$' "$TMPD/o"; then
    ok bench_md_rows
else fail bench_md_rows "$(cat "$TMPD/o")"; fi

# csv with depth: both rows carry the depth and a positive rate
expect_ok bench_csv $MOERUN bench -m "$K" -p 16 -n 4 -r 1 --depth 20 -o csv
if [ "$(awk -F, 'NR > 1 && $7 == 20 && $8 > 0' "$TMPD/o" | wc -l)" -eq 2 ] && head -n 1 "$TMPD/o" | grep -q '^model,arch,size_gib,threads,test,n,depth,tps_mean,tps_sd,moe_approx$'; then
    ok bench_csv_depth
else fail bench_csv_depth "$(cat "$TMPD/o")"; fi

# json: one object per test
expect_ok bench_json $MOERUN bench -m "$K" -p 0 -n 4 -r 3 -o json
grep -q '^\[{"model":"kjv-moe-q8_0.gguf","arch":"qwen3moe",.*"test":"tg","n":4,"depth":0,"reps":3,"tps_mean":[0-9.]*,"tps_sd":[0-9.]*,"moe_approx":"off"}\]$' "$TMPD/o" &&
    ok bench_json_row || fail bench_json_row "$(cat "$TMPD/o")"

# the active MoE approximation: a column in md, the last field in csv and json
expect_ok bench_approx_md $MOERUN bench -m "$K" -p 16 -n 4 -r 1 --moe-approx "k=3 layers=1-"
if grep -q '^| model | arch | size | threads | test | t/s | moe approx |$' "$TMPD/o" &&
   grep -q '^| kjv-moe-q8_0.gguf | qwen3moe | 0.03 GiB | [0-9]* | tg4 | [0-9.]* ± [0-9.]* | .*k=3 .*layers=1- .*|$' "$TMPD/o"; then
    ok bench_approx_md_column
else fail bench_approx_md_column "$(cat "$TMPD/o")"; fi
expect_ok bench_approx_csv $MOERUN bench -m "$K" -p 0 -n 4 -r 1 --moe-prune 0.9 -o csv
if [ "$(awk -F, 'NR > 1 && $10 ~ /^"prune=0.9 .*"$/' "$TMPD/o" | wc -l)" -eq 1 ]; then ok bench_approx_csv_field
else fail bench_approx_csv_field "$(cat "$TMPD/o")"; fi
expect_ok bench_approx_json $MOERUN bench -m "$K" -p 0 -n 4 -r 1 --moe-prune 0.9 -o json
grep -q '"moe_approx":"prune=0.9 [^"]*"}\]$' "$TMPD/o" && ok bench_approx_json_field || fail bench_approx_json_field "$(cat "$TMPD/o")"

# profile: both phases, the tokens counted (prefill 3 reps x 16, decode 3 reps x 4; warm-up and depth
# excluded), attention and the expert products among the operators, shares <= 100%
expect_ok bench_profile $MOERUN bench -m "$K" -p 16 -n 4 -r 3 --depth 5 --profile
if grep -q '^prefill: 48 tokens in 3 evals' "$TMPD/o" && grep -q '^decode: 12 tokens in 12 evals' "$TMPD/o" &&
   grep -q '^  attention ' "$TMPD/o" && grep -q '^  moe_experts ' "$TMPD/o" && grep -q '^  mm attn_q+k+v ' "$TMPD/o"; then
    ok bench_profile_table
else fail bench_profile_table "$(cat "$TMPD/o")"; fi
awk '/%$/ { s = $NF; sub(/%/, "", s); if (s + 0 > 100.0) bad = 1 } END { exit bad }' "$TMPD/o" &&
    ok bench_profile_shares || fail bench_profile_shares "a share above 100%"
# decode: attention called once per layer (4) per token
awk '/^decode:/ { d = 1 } d && $1 == "attention" { exit !($2 == "4.00") }' "$TMPD/o" &&
    ok bench_profile_calls_per_token || fail bench_profile_calls_per_token "$(grep -A3 '^decode' "$TMPD/o")"

# run --profile prints the table on stderr after the statistics
expect_ok run_profile $MOERUN run -m "$K" -p "And God said" --temp 0 -n 8 --profile
grep -q '^decode: 7 tokens in 7 evals' "$TMPD/e" && grep -q '^prefill: 4 tokens in 1 evals' "$TMPD/e" &&
    ok run_profile_table || fail run_profile_table "$(tail -n 20 "$TMPD/e")"

# errors
expect_err bench_no_model "-m MODEL is required" $MOERUN bench -p 8
expect_err bench_bad_format "-o must be" $MOERUN bench -m "$K" -o xml
expect_err bench_missing_model "" $MOERUN bench -m /nonexistent.gguf -p 8 -n 0
expect_err bench_bad_option "unknown option" $MOERUN bench -m "$K" --frobnicate
expect_err bench_bad_number "bad value" $MOERUN bench -m "$K" -p 12x
expect_err bench_zero_reps "bad value .0. for -r" $MOERUN bench -m "$K" -r 0
