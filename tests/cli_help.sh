#!/bin/sh
# Every `moerun COMMAND --help` tells the truth: it exits 0 with a usage line on stdout, every option it
# lists is accepted, bad numeric values are errors (exit 1, "error: ..." on stderr) rather than 0.
. tests/lib.sh
A=$SHARED/models/aidreams260K.gguf

CMDS="run chat logits perplexity server bench synth tokenize inspect quant-check cache-sim plan"

# the command list names every command, and each has a --help
"$MOERUN" --help >"$TMPD/top" 2>&1
for c in $CMDS; do
  grep -q "^  $c " "$TMPD/top" || fail "help_listed_$c" "not in moerun --help"
  if "$MOERUN" "$c" --help >"$TMPD/o" 2>"$TMPD/e" && grep -q "^usage: moerun $c" "$TMPD/o" && [ ! -s "$TMPD/e" ]; then
    ok "help_$c"; else fail "help_$c" "rc=$? $(head -c 200 "$TMPD/o") $(head -c 200 "$TMPD/e")"; fi
done
[ "$(grep -c '^  [a-z]' "$TMPD/top")" -eq "$(echo $CMDS | wc -w)" ] && ok help_command_count ||
  fail help_command_count "moerun --help lists commands that this test does not know: $(grep '^  [a-z]' "$TMPD/top" | tr -s ' ' | cut -d' ' -f2 | tr '\n' ' ')"

# Each option named in a command's --help is accepted by its parser. The option is given with a dummy
# value and followed by a bogus option: the command stops at the bogus one (doing no work), and an
# option it does not know would be reported first, by name.
for c in $CMDS; do
  bad=""
  for o in $("$MOERUN" "$c" --help | grep -oE '(^|[][ (,|])--?[a-zA-Z][a-zA-Z0-9-]*' | sed 's/^[][ (,|]//' | sort -u); do
    "$MOERUN" "$c" "$o" 1 --zz-bogus >"$TMPD/o" 2>"$TMPD/e" </dev/null
    grep '^error: unknown.*option' "$TMPD/e" >"$TMPD/e1"
    if grep -qE "'$o'| $o( |\$)" "$TMPD/e1"; then bad="$bad $o"; fi
  done
  [ -z "$bad" ] && ok "help_options_accepted_$c" || fail "help_options_accepted_$c" "listed but rejected:$bad"
done

# Bad numbers are rejected by name instead of silently becoming 0. The model does not exist and the
# synth shape is unknown, so a command that accepted the value would fail fast with another error.
N=$TMPD/none.gguf
bad_value() { n=$1; shift; expect_err "$n" "bad value" "$MOERUN" "$@"; }
bad_value run_n_abc         run -m "$N" -p hi -n abc
bad_value run_threads_neg   run -m "$N" -p hi -t -2
bad_value run_ctx_abc       run -m "$N" -p hi -c 12x
bad_value run_temp_abc      run -m "$N" -p hi --temp abc
bad_value run_top_p_range   run -m "$N" -p hi --top-p 1.5
bad_value run_top_k_frac    run -m "$N" -p hi --top-k 2.5
bad_value run_penalty_zero  run -m "$N" -p hi --repeat-penalty 0
bad_value run_seed_neg      run -m "$N" -p hi --seed -1
bad_value chat_n_zero       chat -m "$N" -n 0
bad_value chat_last_n_abc   chat -m "$N" --repeat-last-n abc
bad_value logits_threads    logits -m "$N" --tokens 1,2 -o "$TMPD/x.lgts" -t many
bad_value perplexity_ctx    perplexity -m "$N" -f "$A" -c 2
bad_value perplexity_bos    perplexity -m "$N" -f "$A" --bos -2
bad_value server_port       server -m "$N" --port 80abc
bad_value server_ctx        server -m "$N" -c -1
bad_value server_threads_eq server -m "$N" --threads=-2
bad_value server_parallel   server -m "$N" -np 0
bad_value bench_pp          bench -m "$N" -p abc
bad_value bench_reps        bench -m "$N" -r 0
bad_value synth_layers      synth -o "$TMPD/x.gguf" --layers 0 --shape none
bad_value synth_seed        synth -o "$TMPD/x.gguf" --seed 1x --shape none
bad_value synth_zipf        synth -o "$TMPD/x.gguf" --zipf -1 --shape none

# values that are valid: hex seeds, 0 threads (= physical cores), the prompt from a file
printf 'I dreamed' >"$TMPD/p.txt"
expect_ok run_seed_hex_threads0 "$MOERUN" run -m "$A" -f "$TMPD/p.txt" -n 2 --seed 0x5eed -t 0
grep -q '^I dreamed' "$TMPD/o" && ok run_prompt_file || fail run_prompt_file "$(head -c 100 "$TMPD/o")"
expect_err run_prompt_twice "not both" "$MOERUN" run -m "$A" -p hi -f "$TMPD/p.txt"
# the same seed gives the same text whether written in decimal or hex
"$MOERUN" run -m "$A" -p "I dreamed" -n 16 --temp 1 --seed 24301 >"$TMPD/d" 2>/dev/null
"$MOERUN" run -m "$A" -p "I dreamed" -n 16 --temp 1 --seed 0x5eed >"$TMPD/h" 2>/dev/null
cmp -s "$TMPD/d" "$TMPD/h" && ok run_seed_hex_equals_decimal || fail run_seed_hex_equals_decimal "outputs differ"

# an unknown trailing word is named as such, not as an option missing its value
expect_err tokenize_unknown_word "unexpected argument 'extra'" "$MOERUN" tokenize -m "$A" -p hi extra
expect_err bench_unknown_word "unknown option '--bogus'" "$MOERUN" bench -m "$A" --bogus

# no command: the usage on stderr, then an error line, exit 1
expect_err no_command "no command given" "$MOERUN"
expect_err unknown_command "unknown command 'frobnicate'" "$MOERUN" frobnicate
