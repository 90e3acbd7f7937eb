#!/bin/sh
# moerun chat: multi-turn over stdin, only new text is evaluated each turn, /exit, errors.
. tests/lib.sh
K=$SHARED/models/kjv-moe-q8_0.gguf

printf 'Hello there\nWhat is light?\n/exit\n' | "$MOERUN" chat -m "$K" --temp 0 -n 12 --show-prompt >"$TMPD/o" 2>"$TMPD/e"
rc=$?
turns=$(grep -c '^\[prompt\]' "$TMPD/e")
# the second turn starts with the end of the first reply (chatml), not with the whole conversation again
second=$(grep '^\[prompt\]' "$TMPD/e" | sed -n 2p)
if [ $rc -eq 0 ] && [ "$turns" -eq 2 ] && [ "$second" = "[prompt] <|im_end|>" ] &&
   [ "$(grep -c 'generated' "$TMPD/e")" -eq 2 ] && [ "$(wc -c <"$TMPD/o")" -gt 20 ]; then
  ok chat_two_turns; else fail chat_two_turns "rc=$rc turns=$turns second='$second' $(head -c 300 "$TMPD/e")"; fi

# greedy chat is deterministic
printf 'Hello there\nWhat is light?\n/exit\n' | "$MOERUN" chat -m "$K" --temp 0 -n 12 --show-prompt >"$TMPD/o2" 2>/dev/null
if cmp -s "$TMPD/o" "$TMPD/o2"; then ok chat_deterministic; else fail chat_deterministic "outputs differ"; fi

# a system prompt and an explicit template
printf 'Hi\n' | "$MOERUN" chat -m "$K" -sys "You are terse." --chat-template llama3 --temp 0 -n 4 --show-prompt >"$TMPD/o" 2>"$TMPD/e"
if grep -q '<|start_header_id|>system<|end_header_id|>' "$TMPD/e"; then ok chat_template_option; else fail chat_template_option "$(head -c 300 "$TMPD/e")"; fi

expect_err chat_bad_template "unknown chat template" "$MOERUN" chat -m "$K" --chat-template nope
expect_err chat_no_model "required" "$MOERUN" chat
expect_ok chat_help "$MOERUN" chat --help
