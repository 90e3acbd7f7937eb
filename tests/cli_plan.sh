#!/bin/sh
# moerun plan on synthesized models (needs only the checkout): the report's lines for a MoE model with
# an arena and for a dense one, the arena --ram-budget auto chooses for a given --ram, and errors.
. tests/lib.sh
M=$TMPD/moe.gguf D=$TMPD/dense.gguf
"$MOERUN" synth -o "$M" --shape qwen3-small --layers 2 --mix q4_0 --seed 3 2>/dev/null &&
"$MOERUN" synth -o "$D" --shape llama-tiny --mix q8_0 --seed 3 2>/dev/null || { fail plan_setup "synth"; exit 1; }

if "$MOERUN" plan -m "$M" --arena 16M --seconds 0.3 -t 1 >"$TMPD/o" 2>"$TMPD/e"; then
  miss=
  for pat in '^model: .*qwen3moe, 2 layers, 2 MoE layers of 64 experts, top-4' '^  weights .*routed experts' \
             '^machine: .* 1 threads; DRAM read [0-9.]* GB/s' '^arena: 16.00 MiB (--arena), [0-9.]*% of the experts' \
             '^  resident .*-bound' '^run: moerun run -m .* -t 1 --ram-budget 16M'; do
    grep -q "$pat" "$TMPD/o" || miss="$miss [$pat]"
  done
  # the disk line may say 'not measured' where the temporary directory has no O_DIRECT (tmpfs)
  if grep -q 'disk [0-9.]* GB/s' "$TMPD/o"; then grep -q '^  paged .*-bound' "$TMPD/o" || miss="$miss [paged]"; fi
  if [ -z "$miss" ]; then ok plan_moe; else fail plan_moe "missing$miss in: $(head -c 600 "$TMPD/o")"; fi
else fail plan_moe "exit $?: $(head -c 300 "$TMPD/e")"; fi

expect_ok plan_dense "$MOERUN" plan -m "$D" --seconds 0.3 -t 1
if grep -q '^dense model: nothing to page' "$TMPD/o" && ! grep -q '^  paged' "$TMPD/o"; then ok plan_dense_text
else fail plan_dense_text "$(head -c 400 "$TMPD/o")"; fi

# --ram large enough for everything: auto pages nothing; too small: the auto budget's own error
expect_ok plan_ram_fits "$MOERUN" plan -m "$M" --ram 64G --seconds 0.3 -t 1
if grep -q '^arena: every expert fits' "$TMPD/o"; then ok plan_ram_fits_text; else fail plan_ram_fits_text "$(grep arena "$TMPD/o")"; fi
expect_err plan_ram_small "the minimum is" "$MOERUN" plan -m "$M" --ram 100M --seconds 0.3
expect_err plan_no_model "no model" "$MOERUN" plan
expect_err plan_bad_ram "bad --ram" "$MOERUN" plan -m "$M" --ram lots
expect_err plan_missing "cannot open" "$MOERUN" plan -m "$TMPD/none.gguf"
