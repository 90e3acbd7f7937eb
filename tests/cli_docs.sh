#!/bin/sh
# README.md and docs/*.md describe the software and measured figures with their conditions: no
# history or process narrative. Fails on the words of such narrative (who worked on it, in which
# work session or issue, what was tried); API sessions (mr_session_*) are not among them.
. tests/lib.sh
PAT='\b(engineers?|helpers?|the team|the lead|lead'"'"'s|we|our)\b|\b(this|next|previous|earlier) (work )?session\b|end of the (next )?session|\b(this|the|that|earlier|an earlier) issue\b|\bissue'"'"'s\b|\bissues? [0-9]+|\bnot landed\b|the previous code|the earlier default|before the streaming rework|\bsince then\b'
for f in README.md docs/*.md; do
  n=$(basename "$f" .md)
  if grep -n -i -E "$PAT" "$f" >"$TMPD/hits"; then
    fail "docs_words_$n" "$(head -3 "$TMPD/hits" | cut -c1-160 | tr '\n' ' ')"
  else
    ok "docs_words_$n"
  fi
done
# dated notebook headings ("#### 2026-12-04: ...")
if grep -n -E '^#+ *[0-9]{4}-[0-9]{2}-[0-9]{2}:' README.md docs/*.md >"$TMPD/dated"; then
  fail docs_dated_headings "$(head -3 "$TMPD/dated" | tr '\n' ' ')"
else
  ok docs_dated_headings
fi
