#!/bin/sh
# make bench-vs-llama: mr_matmul next to llama.cpp's CPU MUL_MAT on the same machine, same shapes,
# same thread count, timed the same way (bench/bench_mm.c, bench/ggml_mm.c), rounds interleaved.
# Prints per type / shape / column count the best microseconds of each side over the rounds and
# the ratio ours/llama.cpp as throughput (llama.cpp time / our time: > 1 means we are faster).
#
#   LLAMA=/work/ref/llama  llama.cpp tree with build/bin/libggml*.so (default /work/ref/llama)
#   ROUNDS=2  THREADS=2  MIN_TIME=1  TYPES=iq3_s,mxfp4,...  SHAPES=4096x2048,4096x4096  NCOLS=1,512
# Run it nice'd on a machine as quiet as you can get; it prints the load average before and after.
# With THREADS=1 both sides are timed in the thread's CPU time (robust to other load); with more
# threads in wall time (then the load average matters: ggml's threads wait for each other).
set -e
BUILD=${1:-build}
LLAMA=${LLAMA:-/work/ref/llama}
ROUNDS=${ROUNDS:-2}
THREADS=${THREADS:-2}
MIN_TIME=${MIN_TIME:-1}
SHAPES=${SHAPES:-4096x2048,4096x4096}
NCOLS=${NCOLS:-1,512}
TYPES=${TYPES:-f16,bf16,q8_0,q4_0,q4_1,q2_K,q4_K,q5_K,q6_K,iq2_xxs,iq3_s,iq4_nl,iq4_xs,mxfp4,nvfp4,iq1_s,iq1_m}

GGML_BIN=$BUILD/bench/ggml_mm
LIBDIR=$LLAMA/build/bin
if [ ! -f "$LIBDIR/libggml-cpu.so" ]; then echo "error: no llama.cpp build at $LIBDIR" >&2; exit 1; fi
mkdir -p "$BUILD/bench"
if [ ! -x "$GGML_BIN" ] || [ bench/ggml_mm.c -nt "$GGML_BIN" ]; then
    cc -std=gnu11 -O2 -o "$GGML_BIN" bench/ggml_mm.c -I"$LLAMA/ggml/include" -L"$LIBDIR" \
        -lggml -lggml-base -lggml-cpu -Wl,-rpath,"$LIBDIR"
fi
OUT=$BUILD/bench/vs_llama_t$THREADS.txt
: > "$OUT"
ARGS="--types $TYPES --shapes $SHAPES --ncols $NCOLS --threads $THREADS --min-time $MIN_TIME"
echo "# load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
r=1
while [ $r -le "$ROUNDS" ]; do
    # one type at a time, alternating sides, so both see the same load
    for t in $(echo "$TYPES" | tr ',' ' '); do
        A="--types $t --shapes $SHAPES --ncols $NCOLS --threads $THREADS --min-time $MIN_TIME"
        nice -n 10 "$BUILD/bench/bench_mm" $A | grep '^mm ' >> "$OUT"
        nice -n 10 "$GGML_BIN" $A | grep '^ggml ' >> "$OUT"
    done
    echo "# round $r done, load average $(cut -d' ' -f1-3 /proc/loadavg)"
    r=$((r + 1))
done
echo "# $ARGS, $ROUNDS rounds; us: best over rounds (median window of the best round in brackets)"
awk '
{ key = tolower($2) " " $3 "x" $4 " " $5
  if ($1 == "mm")   { if (!(key in mb) || $6 < mb[key]) { mb[key] = $6; mm[key] = $7 } }
  if ($1 == "ggml") { if (!(key in gb) || $6 < gb[key]) { gb[key] = $6; gm[key] = $7 }
                      if (!(key in seen)) { seen[key] = 1; order[n++] = key } } }
END {
  printf "%-8s %-10s %4s | %10s %10s | %10s %10s | %6s\n", "type", "shape", "n", "ours us", "(median)", "llama us", "(median)", "ratio"
  for (i = 0; i < n; i++) {
    k = order[i]; split(k, f, " ")
    if (!(k in mb)) continue
    printf "%-8s %-10s %4s | %10.1f %10.1f | %10.1f %10.1f | %6.2f\n", f[1], f[2], f[3], mb[k], mm[k], gb[k], gm[k], gb[k] / mb[k]
  }
}' "$OUT"
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
