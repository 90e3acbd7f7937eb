#!/usr/bin/env python3
"""Lists the C functions longer than a limit (docs/DEVELOPING.md: functions under 120 lines).

    python3 scripts/funclen.py [--max N] [--top K] [PATH...]    (default: --max 119 src)

A function is a body at file scope: a '{' at brace depth 0 whose last token before it is ')'
(structs, enums and initializers end otherwise). Its length counts the lines from the line of its
name to the line of its closing brace, static functions included. Comments, strings, character
literals and preprocessor lines are blanked first so their braces do not count. Exits 1 when a
function is longer than --max (printing each as FILE:LINE NAME LINES), 0 otherwise; --top K prints
the K longest whatever their length.
"""
import os
import re
import sys


def blank(text):
    """The text with comments, string/char literals and preprocessor lines replaced by spaces
    (newlines kept, so line numbers stay)."""
    out = []
    i, n = 0, len(text)
    line_start = True
    while i < n:
        c = text[i]
        if line_start and c == '#':
            # a directive, with its backslash continuations
            while i < n and not (text[i] == '\n' and text[i - 1] != '\\'):
                out.append('\n' if text[i] == '\n' else ' ')
                i += 1
            continue
        if c == '/' and text.startswith('/*', i):
            j = text.find('*/', i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r'[^\n]', ' ', text[i:j]))
            i = j
            continue
        if c == '/' and text.startswith('//', i):
            j = text.find('\n', i)
            j = n if j < 0 else j
            out.append(' ' * (j - i))
            i = j
            continue
        if c in '"\'':
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == '\\' else 1
            j = min(j + 1, n)
            out.append(c + re.sub(r'[^\n]', ' ', text[i + 1:j - 1]) + c)
            i = j
            continue
        if c == '\n':
            line_start = True
        elif not c.isspace():
            line_start = False
        out.append(c)
        i += 1
    return ''.join(out)


def functions(path):
    """Yields (name, first line, lines) for every function body in the file."""
    with open(path, encoding='utf-8', errors='replace') as f:
        src = blank(f.read())
    depth = 0
    start = None  # (name, line of the name) of the body being read
    for m in re.finditer(r'[{}]', src):
        pos = m.start()
        if m.group() == '{':
            if depth == 0:
                head = src[:pos].rstrip()
                if head.endswith(')'):
                    start = signature(src, head)
            depth += 1
        else:
            depth -= 1
            if depth == 0 and start is not None:
                name, line = start
                yield name, line, src.count('\n', 0, pos) + 1 - line + 1
                start = None


def signature(src, head):
    """(name, line) of the function whose parameter list ends at the end of head."""
    depth, i = 0, len(head) - 1
    while i >= 0:
        if head[i] == ')':
            depth += 1
        elif head[i] == '(':
            depth -= 1
            if depth == 0:
                break
        i -= 1
    m = re.search(r'([A-Za-z_]\w*)\s*$', head[:max(i, 0)])
    if not m:
        return '?', src.count('\n', 0, i) + 1
    return m.group(1), src.count('\n', 0, m.start(1)) + 1


def sources(paths):
    for p in paths:
        if os.path.isdir(p):
            for root, dirs, files in os.walk(p):
                dirs.sort()
                for f in sorted(files):
                    if f.endswith(('.c', '.h')):
                        yield os.path.join(root, f)
        else:
            yield p


def main(argv):
    limit, top, paths = 119, 0, []
    it = iter(argv)
    for a in it:
        if a == '--max':
            limit = int(next(it))
        elif a == '--top':
            top = int(next(it))
        else:
            paths.append(a)
    found = [(lines, f'{path}:{line}', name)
             for path in sources(paths or ['src']) for name, line, lines in functions(path)]
    found.sort(key=lambda x: (-x[0], x[1]))
    for lines, where, name in found[:top]:
        print(f'{where} {name} {lines}')
    over = [x for x in found if x[0] > limit]
    for lines, where, name in over:
        print(f'{where} {name} {lines} lines (limit {limit})', file=sys.stderr)
    return 1 if over else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
