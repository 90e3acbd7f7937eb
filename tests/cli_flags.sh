#!/bin/sh
# The CLI a llama.cpp user does not have to relearn (issue 15), on a synthesized 1-layer model (needs
# only the checkout): alias pairs behave identically, --opt=value, llama.cpp's GPU/mmap flags give a
# notice, -n -1, -f -, a random printed seed, bench lists, inspect -m, help CMD, the training-context
# warning, progress lines on a terminal, Ctrl-C during the prompt (exit 130), chat commands and
# context shift, bench --plot.
. tests/lib.sh
M=$TMPD/m.gguf
"$MOERUN" synth -o "$M" --shape deepseek-v4-tiny --layers 1 --mix q8_0 --seed 5 2>/dev/null || { fail flags_setup "synth"; exit 1; }
printf 'The quick brown fox jumps over the lazy dog' >"$TMPD/p.txt"

# same stdout for two spellings of the same run
same() { name=$1; shift; a=$1; b=$2
  sh -c "\"$MOERUN\" run $a" >"$TMPD/a" 2>"$TMPD/ae" </dev/null; ra=$?
  sh -c "\"$MOERUN\" run $b" >"$TMPD/b" 2>"$TMPD/be" <"$TMPD/p.txt"; rb=$?
  if [ $ra -eq 0 ] && [ $rb -eq 0 ] && [ -s "$TMPD/a" ] && cmp -s "$TMPD/a" "$TMPD/b"; then ok "$name"
  else fail "$name" "rc $ra/$rb: '$(head -c 120 "$TMPD/a")' vs '$(head -c 120 "$TMPD/b")' $(head -c 200 "$TMPD/be")"; fi; }
B="--temp 0 -n 12 --show-ids"
same alias_model          "-m $M -p hello $B"            "--model $M -p hello $B"
same alias_prompt         "-m $M -p hello $B"            "-m $M --prompt hello $B"
same alias_prompt_eq      "-m $M -p hello $B"            "-m $M --prompt=hello $B"
same alias_file           "-m $M -f $TMPD/p.txt $B"      "-m $M --file $TMPD/p.txt $B"
same alias_file_stdin     "-m $M -f $TMPD/p.txt $B"      "-m $M -f - $B"
same alias_n_predict      "-m $M -p hi --temp 0 -n 7 --show-ids" "-m $M -p hi --temp 0 --n-predict 7 --show-ids"
same alias_predict_eq     "-m $M -p hi --temp 0 -n 7 --show-ids" "-m $M -p hi --temp 0 --predict=7 --show-ids"
same alias_temp_eq        "-m $M -p hi --temp 0 -n 9 --show-ids" "-m $M -p hi --temp=0 -n 9 --show-ids"
same alias_temperature    "-m $M -p hi --temp 0 -n 9 --show-ids" "-m $M -p hi --temperature 0 -n 9 --show-ids"
same alias_threads        "-m $M -p hi $B -t 1"          "-m $M -p hi $B --threads 1"
same alias_ctx            "-m $M -p hi $B -c 64"         "-m $M -p hi $B --ctx-size 64"
same alias_seed           "-m $M -p hi --temp 1 -n 16 --show-ids -s 42" "-m $M -p hi --temp 1 -n 16 --show-ids --seed 42"
same alias_seed_eq        "-m $M -p hi --temp 1 -n 16 --show-ids -s 42" "-m $M -p hi --temp 1 -n 16 --show-ids --seed=42"
same batch_size_invariant "-m $M -f $TMPD/p.txt $B"      "-m $M -f $TMPD/p.txt $B -b 3"
same alias_batch          "-m $M -f $TMPD/p.txt $B -b 3" "-m $M -f $TMPD/p.txt $B --batch-size 3"
same notice_flags_same    "-m $M -p hi $B"               "-m $M -p hi $B -ngl 99 --no-mmap -fa on --jinja --mlock"
same escape_default       "-m $M -p 'a\\tb' $B"          "-m $M -p 'a	b' $B --no-escape"

# llama.cpp flags that do not apply: a one-line notice each, not an error
"$MOERUN" run -m "$M" -p hi -n 1 -ngl 99 --no-mmap -fa --jinja >/dev/null 2>"$TMPD/e"
if [ $? -eq 0 ] && grep -q '^notice: -ngl ignored' "$TMPD/e" && grep -q '^notice: --no-mmap ignored' "$TMPD/e" &&
   grep -q '^notice: -fa ignored' "$TMPD/e" && grep -q '^notice: --jinja ignored' "$TMPD/e"; then ok notice_flags
else fail notice_flags "$(head -c 300 "$TMPD/e")"; fi

# -n -1: until the context is full (with --ignore-eos nothing else stops it)
"$MOERUN" run -m "$M" -p hello -n -1 -c 40 --ignore-eos --temp 0 >/dev/null 2>"$TMPD/e"
np=$(sed -n 's/^prompt: \([0-9]*\) tokens.*/\1/p' "$TMPD/e"); ng=$(sed -n 's/^generated: \([0-9]*\) tokens.*/\1/p' "$TMPD/e")
if [ -n "$np" ] && [ "$ng" = $((40 - np)) ]; then ok n_predict_minus_one; else fail n_predict_minus_one "prompt $np generated $ng $(head -c 200 "$TMPD/e")"; fi

# the seed is random unless given, printed, and reproduces the run when given back
"$MOERUN" run -m "$M" -p hi --temp 1 -n 24 --show-ids >"$TMPD/r1" 2>"$TMPD/e1"
"$MOERUN" run -m "$M" -p hi --temp 1 -n 24 --show-ids >"$TMPD/r2" 2>"$TMPD/e2"
s1=$(sed -n 's/^seed: //p' "$TMPD/e1"); s2=$(sed -n 's/^seed: //p' "$TMPD/e2")
"$MOERUN" run -m "$M" -p hi --temp 1 -n 24 --show-ids --seed "$s1" >"$TMPD/r3" 2>/dev/null
if [ -n "$s1" ] && [ "$s1" != "$s2" ] && cmp -s "$TMPD/r1" "$TMPD/r3"; then ok seed_random_printed
else fail seed_random_printed "seeds '$s1' '$s2'"; fi

# a context above the training context is accepted with a warning
"$MOERUN" run -m "$M" -p hi -n 1 -c 5000 >/dev/null 2>"$TMPD/e"
if grep -q '^warning: context 5000 is larger than the 4096 positions the model was trained on' "$TMPD/e"; then ok ctx_train_warning
else fail ctx_train_warning "$(head -c 300 "$TMPD/e")"; fi
"$MOERUN" run -m "$M" -p hi -n 1 -c 4096 >/dev/null 2>"$TMPD/e"
if ! grep -q '^warning: context' "$TMPD/e"; then ok ctx_train_no_warning; else fail ctx_train_no_warning "warned at 4096"; fi

# the load summary names what was chosen
if grep -q '^load: .* s (deepseek4, [0-9]* threads, 1 layers, context 4096 of 4096 trained)' "$TMPD/e"; then ok load_summary
else fail load_summary "$(grep '^load' "$TMPD/e")"; fi

# progress on a terminal (through a pseudo-terminal), none when stderr is a file
python3 -c "print('the quick brown fox ' * 200)" >"$TMPD/long.txt"
script -qec "\"$MOERUN\" run -m \"$M\" -f \"$TMPD/long.txt\" -n 2 -b 64 --temp 0" /dev/null >"$TMPD/tty" 2>&1
if grep -q 'prefill: 64/[0-9]* tokens ([0-9]*%), [0-9.]* tokens/s, ETA' "$TMPD/tty"; then ok progress_tty
else fail progress_tty "$(head -c 300 "$TMPD/tty" | od -c | head -5)"; fi
"$MOERUN" run -m "$M" -f "$TMPD/long.txt" -n 2 -b 64 --temp 0 >/dev/null 2>"$TMPD/e"
if ! grep -q 'prefill:' "$TMPD/e"; then ok progress_not_on_files; else fail progress_not_on_files "progress written to a file"; fi

# Ctrl-C during the prompt stops it within a chunk: exit 130. The signal is sent once the load
# line is out; one token per chunk on one thread makes the prompt take far longer than that wait.
python3 -c "print('the quick brown fox ' * 550)" >"$TMPD/huge.txt"
# (a file of its own, emptied first: the child truncates it only after the fork, and an older
# "load:" line must not release the signal early)
: >"$TMPD/ctrlc"
"$MOERUN" run -m "$M" -f "$TMPD/huge.txt" -n 4 -b 1 -t 1 -c 8192 --temp 0 >/dev/null 2>"$TMPD/ctrlc" &
pid=$!
i=0; while [ $i -lt 500 ] && ! grep -q '^load:' "$TMPD/ctrlc"; do sleep 0.02; i=$((i + 1)); done
kill -INT $pid; wait $pid; rc=$?
if [ $rc -eq 130 ] && grep -q 'interrupted during the prompt: [0-9]* of [0-9]* tokens evaluated' "$TMPD/ctrlc"; then ok ctrl_c_prefill
else fail ctrl_c_prefill "rc=$rc $(tail -c 300 "$TMPD/ctrlc")"; fi

# help CMD, inspect -m
"$MOERUN" help run >"$TMPD/h1"; "$MOERUN" run --help >"$TMPD/h2"
if cmp -s "$TMPD/h1" "$TMPD/h2" && grep -q '^usage: moerun run' "$TMPD/h1"; then ok help_command; else fail help_command "differs"; fi
"$MOERUN" inspect -m "$M" >"$TMPD/i1"; "$MOERUN" inspect "$M" >"$TMPD/i2"
if [ -s "$TMPD/i1" ] && cmp -s "$TMPD/i1" "$TMPD/i2"; then ok inspect_m; else fail inspect_m "differs"; fi

# bench lists: the cross product of threads x tests, as llama-bench; --plot draws each row's value
"$MOERUN" bench -m "$M" -p 8,16 -n 4 -t 1,2 -r 1 -o csv --plot "$TMPD/b.svg" >"$TMPD/b.csv" 2>"$TMPD/e"
rows=$(tail -n +2 "$TMPD/b.csv" | cut -d, -f4,5,6 | tr '\n' ' ')
if [ "$rows" = "1,pp,8 1,pp,16 1,tg,4 2,pp,8 2,pp,16 2,tg,4 " ]; then ok bench_cross_product; else fail bench_cross_product "rows: $rows $(head -c 200 "$TMPD/e")"; fi
if python3 - "$TMPD/b.svg" "$TMPD/b.csv" <<'PY'
import sys, csv, xml.etree.ElementTree as ET
svg = ET.parse(sys.argv[1]).getroot()
bars = [float(r.get('data-value')) for r in svg.iter('{http://www.w3.org/2000/svg}rect') if r.get('data-value')]
want = sorted(float(r['tps_mean']) for r in csv.DictReader(open(sys.argv[2])))
got = sorted(bars)
assert len(got) == len(want) == 6, (got, want)
assert all(abs(g - w) <= 1e-3 * w + 0.01 for g, w in zip(got, want)), (got, want)
PY
then ok bench_plot_svg; else fail bench_plot_svg "not well-formed or values differ"; fi
# bench --parallel: each tg test also with N sequences per step ("tg x N" rows, CPU time per token)
"$MOERUN" bench -m "$M" -p 0 -n 4 -t 1 -r 1 -np 1,3 -o csv >"$TMPD/np.csv" 2>"$TMPD/e"
rows=$(tail -n +2 "$TMPD/np.csv" | cut -d, -f5,6 | tr '\n' ' ')
if [ "$rows" = "tg,4 tg x1,4 tg x3,4 " ] && grep -q '^tg4 x3: .* ms CPU per token' "$TMPD/e"; then ok bench_parallel
else fail bench_parallel "rows: $rows $(head -c 200 "$TMPD/e")"; fi

# chat: /help and /clear are commands, not text for the model; /save and /load round-trip
printf '/help\nhello\n/clear\nhello\n/save %s\n/load %s\nbye\n/bogus\n/exit\n' "$TMPD/c.txt" "$TMPD/c.txt" |
  "$MOERUN" chat -m "$M" --temp 0 -n 4 --show-prompt >"$TMPD/o" 2>"$TMPD/e"
rc=$?
p1=$(grep '^\[prompt\]' "$TMPD/e" | sed -n 1p); p2=$(grep '^\[prompt\]' "$TMPD/e" | sed -n 2p)
if [ $rc -eq 0 ] && [ "$(grep -c '^\[prompt\]' "$TMPD/e")" -eq 3 ] && ! grep -q '^\[prompt\].*/help' "$TMPD/e" &&
   [ -n "$p1" ] && [ "$p1" = "$p2" ] && grep -q '/clear' "$TMPD/e" && grep -q 'unknown command /bogus' "$TMPD/e"; then
  ok chat_commands; else fail chat_commands "rc=$rc '$p1' '$p2' $(head -c 300 "$TMPD/e")"; fi
if [ "$(cut -f1 "$TMPD/c.txt" | tr '\n' ' ')" = "user assistant " ] && grep -q '(loaded 2 messages' "$TMPD/e"; then ok chat_save_load
else fail chat_save_load "$(cat "$TMPD/c.txt" | head -c 200)"; fi

# chat: when the context overflows, the oldest turns go and the typed message stays; the
# conversation then continues incrementally from the shifted one
printf 'one\ntwo\nthree\nfour\nzebra\n/exit\n' |
  "$MOERUN" chat -m "$M" --temp 0 -n 24 --ignore-eos -c 256 --chat-template chatml --show-prompt >"$TMPD/o" 2>"$TMPD/e"
rc=$?
tr '\n' ' ' <"$TMPD/e" | sed 's/\[prompt\]/\n&/g' | grep '^\[prompt\]' >"$TMPD/prompts"
shifted=$(grep -n 'four' "$TMPD/prompts" | head -n 1)
if [ $rc -eq 0 ] && grep -q 'context full: dropped the [0-9]* oldest messages' "$TMPD/e" && [ -n "$shifted" ] &&
   ! echo "$shifted" | grep -q 'one' && grep -q '^\[prompt\] <|im_end|> .*zebra' "$TMPD/prompts" &&
   [ "$(grep -c 'generated' "$TMPD/e")" -eq 5 ]; then ok chat_context_shift
else fail chat_context_shift "rc=$rc $(grep -v '^\[prompt' "$TMPD/e" | head -c 300)"; fi

# chat --ram-budget: the pager summary at exit
printf 'hello\n/exit\n' | "$MOERUN" chat -m "$M" --temp 0 -n 4 --ram-budget 432K >/dev/null 2>"$TMPD/e"
if grep -q '^pager: hot' "$TMPD/e"; then ok chat_pager_summary; else fail chat_pager_summary "$(tail -c 300 "$TMPD/e")"; fi
