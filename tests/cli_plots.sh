#!/bin/sh
# cache-sim --plot: well-formed SVG whose points are the printed hit rates (one line per policy,
# Belady among them) on the shared routing trace.
. tests/lib.sh
T=$SHARED/golden/routing/kjv-moe.trace.bin
"$MOERUN" cache-sim --trace "$T" --sizes 10,50,90 --plot "$TMPD/c.svg" >"$TMPD/o" 2>"$TMPD/e"
rc=$?
if [ $rc -eq 0 ] && python3 - "$TMPD/c.svg" "$TMPD/o" <<'PY'
import sys, re, xml.etree.ElementTree as ET
svg = ET.parse(sys.argv[1]).getroot()
pts = {}
for c in svg.iter('{http://www.w3.org/2000/svg}circle'):
    pts.setdefault(c.get('data-series'), []).append((float(c.get('data-x')), float(c.get('data-value'))))
rows = {}
for line in open(sys.argv[2]):
    m = re.match(r'^(\S+)\s*\*?\s+(\d.*)$', line)
    if m and not line.startswith('trace') and not line.startswith('policy'):
        rows[m.group(1)] = [float(v) for v in re.findall(r'(\d+\.\d+) \(', m.group(2) + ' (')]
assert 'belady' in pts and 'lru' in pts, pts.keys()
assert set(pts) == set(rows), (set(pts), set(rows))
for name, vals in rows.items():
    got = [v for _, v in sorted(pts[name])]
    assert [x for x, _ in sorted(pts[name])] == [10, 50, 90]
    assert all(abs(a - b) < 0.01 for a, b in zip(got, vals)), (name, got, vals)
PY
then ok cache_sim_plot; else fail cache_sim_plot "rc=$rc $(head -c 300 "$TMPD/e")"; fi
expect_err cache_sim_plot_unwritable "cannot write" "$MOERUN" cache-sim --trace "$T" --sizes 50 --plot /nonexistent/dir/c.svg
