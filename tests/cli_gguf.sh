#!/bin/sh
# moerun inspect on every shared GGUF file, its output fields, --help and error exits.
. tests/lib.sh
for f in "$SHARED"/models/*.gguf "$SHARED"/vocab/*.gguf; do
    expect_ok "inspect $(basename "$f")" "$MOERUN" inspect "$f"
done
m="$SHARED/models/tiny-qwen3moe.gguf"
"$MOERUN" inspect "$m" >"$TMPD/q" 2>&1
if grep -q '^  general.architecture  *string  *"qwen3moe"$' "$TMPD/q" &&
   grep -q '^  tokenizer.ggml.tokens  *string\[2048\]  *\["<unk>", "<s>", "</s>",.*, \.\.\.\]$' "$TMPD/q" &&
   grep -q '^  blk.1.ffn_down_exps.weight  *f32  *256 x 256 x 8  *2097152  *0  *16275456$' "$TMPD/q" &&
   grep -q '^  f32  *27 tensors  *18372608 bytes' "$TMPD/q" &&
   grep -q '^routed experts: 12582912 bytes (12.00 MiB, 68.5%) in 6 tensors$' "$TMPD/q" &&
   grep -q '^everything else: 5789696 bytes' "$TMPD/q"; then ok "inspect qwen3moe fields"
else fail "inspect qwen3moe fields" "$(head -c 400 "$TMPD/q")"; fi
# per-type totals of a mixed-quant model add up to the file's tensor bytes
"$MOERUN" inspect "$SHARED/models/tiny-qwen3moe-iq3s-mxfp4.gguf" >"$TMPD/m" 2>&1
if grep -q '^  iq3_s ' "$TMPD/m" && grep -q '^  mxfp4 ' "$TMPD/m" &&
   [ "$(awk '/^totals by type/{t=1;next} t&&/^  all /{print $4; exit} t&&/^  /{s+=$4} END{}' "$TMPD/m")" = \
     "$(awk '/^totals by type/{t=1;next} t&&/^  all /{print s; exit} t&&/^  /{s+=$4}' "$TMPD/m")" ]; then ok "inspect type totals"
else fail "inspect type totals" "$(tail -n 12 "$TMPD/m")"; fi
expect_ok "inspect --help" "$MOERUN" inspect --help
expect_err "inspect missing file" "nonexistent.gguf: cannot open" "$MOERUN" inspect "$TMPD/nonexistent.gguf"
expect_err "inspect no args" "no file given" "$MOERUN" inspect
expect_err "inspect two files" "one file" "$MOERUN" inspect "$m" "$m"
expect_err "inspect bad option" "unknown option" "$MOERUN" inspect --bogus "$m"
printf 'not a gguf file at all' >"$TMPD/text.gguf"
expect_err "inspect text file" "text.gguf: not a GGUF file (bad magic" "$MOERUN" inspect "$TMPD/text.gguf"
expect_err "inspect directory" "not a regular file" "$MOERUN" inspect "$TMPD"
