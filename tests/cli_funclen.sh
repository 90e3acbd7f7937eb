# Every function in src/ is under 120 lines (docs/DEVELOPING.md), measured by scripts/funclen.py;
# the checker itself on made-up files: it finds a long function and ignores braces in literals.
. tests/lib.sh
if out=$(python3 scripts/funclen.py --max 119 src 2>&1); then ok funclen_src
else fail funclen_src "$(echo "$out" | head -5 | tr '\n' ';')"; fi

{ echo "static int f(int x) {"; i=0; while [ $i -lt 125 ]; do echo "    x += $i;"; i=$((i + 1)); done
  echo "    return x;"; echo "}"; } >"$TMPD/long.c"
if python3 scripts/funclen.py --max 119 "$TMPD/long.c" 2>"$TMPD/e"; then fail funclen_finds_long "a 128-line function passed"
elif grep -q "long.c:1 f 128 lines" "$TMPD/e"; then ok funclen_finds_long
else fail funclen_finds_long "$(cat "$TMPD/e")"; fi

cat >"$TMPD/lit.c" <<'C'
#define OPEN {
static const char *s = "}}{";
/* { */
int g(char c) {
    if (c == '{') return 1; // }
    return c == '}' ? 2 : "{"[0];
}
struct t { int a; };
int h(void) { return 0; }
C
if python3 scripts/funclen.py --top 5 "$TMPD/lit.c" >"$TMPD/o" 2>&1 && grep -q "lit.c:4 g 4$" "$TMPD/o" &&
   grep -q "lit.c:9 h 1$" "$TMPD/o" && [ "$(wc -l <"$TMPD/o")" -eq 2 ]; then ok funclen_literals
else fail funclen_literals "$(cat "$TMPD/o" | tr '\n' ';')"; fi
