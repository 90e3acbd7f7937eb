#!/bin/sh
# Executed AArch64 instructions per 256 weights of each MoE type's dot-product kernels, counted by
# qemu-aarch64 (make bench-aarch64-insn; docs/PERFORMANCE.md "ARM64"). Not a speed measurement:
# the count says nothing about latencies, throughput per instruction or memory; it is exact and
# repeatable, which emulated time is not.
#
# How: qemu logs every translated block (-d in_asm: its instructions) and every block it enters
# (-d exec with nochain, so that no block runs without being logged); the sum over entered blocks
# of their instruction counts is the number of guest instructions executed. bench_insn is run with
# REPS=1 and REPS=3 on the same data; (count(3) - count(1)) / 2 is one pass (ROWS calls on rows of
# COLS values) with start-up, set-up and the data generation cancelled out.
#
# Usage: bench/aarch64_insn.sh BUILD_DIR [TYPES]    (BUILD_DIR holds bench/bench_insn for AArch64)
# Output: a markdown table; columns: instructions per 256 weights for one column (dot), and per 256
# weights and column for the 4-column kernel (x4), the GEMM block (8 rows x 32 columns) and the
# repacked layout's kernel (1 and 8 columns per call), per ISA; "-" where the ISA has no such kernel.
set -eu
B=${1:?usage: aarch64_insn.sh BUILD_DIR [TYPES]}
TYPES=${2:-"q4_0 q8_0 q4_K q6_K iq4_xs iq4_nl mxfp4 iq3_s iq2_xxs q2_K f16"}
QEMU=${QEMU_AARCH64:-qemu-aarch64}
ROWS=8
COLS=4096
BIN=$B/bench/bench_insn
[ -x "$BIN" ] || { echo "error: $BIN not built" >&2; exit 1; }

# instructions executed by one run: bench_insn ARGS
count() {
    $QEMU -d in_asm,exec,nochain -D /dev/stdout "$BIN" "$@" 2>/dev/null | awk '
        /^IN:/ { pc = ""; k = 0; next }
        /^0x[0-9a-f]+:/ { a = substr($1, 3, length($1) - 3); sub(/^0+/, "", a); if (pc == "") pc = a; n[pc] = ++k; next }
        /^Trace / { split($0, f, "/"); a = f[2]; sub(/^0+/, "", a); total += n[a]; next }
        END { printf "%d\n", total }'
}

# instructions per 256 weights and column of one pass: TYPE ISA MODE; "-" without a kernel
per256() {
    if ! $QEMU "$BIN" "$1" "$2" "$3" 0 $ROWS $COLS >/dev/null 2>&1; then echo "-"; return; fi
    c1=$(count "$1" "$2" "$3" 1 $ROWS $COLS)
    c3=$(count "$1" "$2" "$3" 3 $ROWS $COLS)
    cols=1
    [ "$3" = dot4 ] && cols=4
    [ "$3" = gemm ] && cols=32
    [ "$3" = rp8 ] && cols=8
    awk -v a="$c1" -v b="$c3" -v w=$((ROWS * COLS / 256 * cols)) 'BEGIN { printf "%.0f\n", (b - a) / 2 / w }'
}

echo "# $($QEMU --version | head -1); $ROWS rows x $COLS values per pass; instructions per 256 weights (x4: and column)"
echo "| type | scalar dot | neon dot | neon x4 | neon gemm | dotprod dot | dotprod x4 | dotprod gemm | dotprod repacked 1 / 8 columns |"
echo "|---|---|---|---|---|---|---|---|---|"
for t in $TYPES; do
    s=$(per256 "$t" scalar dot)
    n1=$(per256 "$t" neon dot)
    n4=$(per256 "$t" neon dot4)
    ng=$(per256 "$t" neon gemm)
    d1=$(per256 "$t" dotprod dot)
    d4=$(per256 "$t" dotprod dot4)
    dg=$(per256 "$t" dotprod gemm)
    r1=$(per256 "$t" dotprod rp1)
    r8=$(per256 "$t" dotprod rp8)
    echo "| $t | $s | $n1 | $n4 | $ng | $d1 | $d4 | $dg | $r1 / $r8 |"
done
