#!/bin/sh
# moerun tokenize: golden prompts, -f input, flags, errors.
. tests/lib.sh
# expect_out NAME EXPECTED CMD...: command must exit 0 and print exactly EXPECTED
expect_out() { n=$1; want=$2; shift 2; got=$("$@" 2>"$TMPD/e"); rc=$?
  if [ $rc -eq 0 ] && [ "$got" = "$want" ]; then ok "$n"; else fail "$n" "rc=$rc got '$got' want '$want' $(head -c 200 "$TMPD/e")"; fi; }
ids() { echo "[$(tr -d ' \n' <"$1" | sed 's/,/, /g')]"; }

expect_out "tokenize aidreams prompt" "$(ids "$SHARED/golden/tokens-aidreams.txt")" \
    "$MOERUN" tokenize -m "$SHARED/models/aidreams260K.gguf" -p "I dreamed"
expect_out "tokenize kjv prompt" "$(ids "$SHARED/golden/tokens-kjv-prompt.txt")" \
    "$MOERUN" tokenize -m "$SHARED/models/kjv-moe-q8_0.gguf" -p "And God said"
expect_out "tokenize --no-bos" "[300, 400, 387]" \
    "$MOERUN" tokenize -m "$SHARED/models/kjv-moe-q8_0.gguf" -p "And God said" --no-bos
v="$SHARED/vocab/ggml-vocab-gpt-2.gguf"
expect_out "tokenize vocab file" "[15496, 995]" "$MOERUN" tokenize -m "$v" -p "Hello world"
expect_out "tokenize parse special" "[15496, 50256, 6894]" "$MOERUN" tokenize -m "$v" -p "Hello<|endoftext|>world"
expect_out "tokenize --no-parse-special" "[15496, 27, 91, 437, 1659, 5239, 91, 29, 6894]" \
    "$MOERUN" tokenize -m "$v" -p "Hello<|endoftext|>world" --no-parse-special
# -f reads bytes as they are (here: a trailing newline)
printf 'Hello world\n' >"$TMPD/in.txt"
expect_out "tokenize -f" "[15496, 995, 198]" "$MOERUN" tokenize -m "$v" -f "$TMPD/in.txt"
: >"$TMPD/empty.txt"
expect_out "tokenize empty file" "[]" "$MOERUN" tokenize -m "$v" -f "$TMPD/empty.txt"
expect_ok "tokenize --help" "$MOERUN" tokenize --help
expect_err "tokenize no model" "-m MODEL" "$MOERUN" tokenize -p x
expect_err "tokenize no text" "exactly one" "$MOERUN" tokenize -m "$v"
expect_err "tokenize missing file" "cannot read" "$MOERUN" tokenize -m "$v" -f "$TMPD/nope.txt"
expect_err "tokenize bad model" "nope.gguf" "$MOERUN" tokenize -m "$TMPD/nope.gguf" -p x
expect_err "tokenize bad option" "unknown option" "$MOERUN" tokenize -m "$v" --bogus x
