#!/bin/sh
# Side-by-side speed of moerun and the reference llama.cpp (llama-bench) on the same GGUF files, same
# threads, in one run (nice'd; the machine may be shared, so compare the ratios of one run).
#   bench/compare_llama.sh [-t 2] [-p 512] [-n 128] [-r 1] MODEL.gguf...
# LLAMA_BENCH: path of llama-bench (default /work/ref/llama/build/bin/llama-bench; not built here).
# MOERUN: path of moerun (default build/moerun). Prints one markdown table: t/s of both and the ratio.
T=2; P=512; N=128; R=1
while [ $# -gt 0 ]; do
    case "$1" in
    -t) T=$2; shift 2;; -p) P=$2; shift 2;; -n) N=$2; shift 2;; -r) R=$2; shift 2;;
    -h|--help) sed -n '2,6p' "$0"; exit 0;;
    *) break;;
    esac
done
[ $# -ge 1 ] || { echo "usage: $0 [-t T] [-p P] [-n N] [-r R] MODEL.gguf..." >&2; exit 1; }
LLAMA_BENCH=${LLAMA_BENCH:-/work/ref/llama/build/bin/llama-bench}
MOERUN=${MOERUN:-build/moerun}
[ -x "$LLAMA_BENCH" ] || { echo "error: llama-bench not found at $LLAMA_BENCH (set LLAMA_BENCH)" >&2; exit 1; }
export LD_LIBRARY_PATH="$(dirname "$LLAMA_BENCH")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

echo "# $(date -u +%FT%TZ) threads $T, pp$P / tg$N, $R repetition(s); load average: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "| model | test | moerun t/s | llama.cpp t/s | ratio |"
echo "|---|---|---:|---:|---:|"
for m in "$@"; do
    b=$(basename "$m")
    # moerun: csv rows "model,arch,size_gib,threads,test,n,depth,tps_mean,tps_sd"
    nice -n 5 "$MOERUN" bench -m "$m" -p "$P" -n "$N" -r "$R" -t "$T" -o csv >"$tmp/mr.csv" 2>"$tmp/mr.err" ||
        { echo "error: moerun bench failed on $b: $(tail -n 1 "$tmp/mr.err")" >&2; continue; }
    nice -n 5 "$LLAMA_BENCH" -m "$m" -p "$P" -n "$N" -r "$R" -t "$T" -o csv >"$tmp/ll.csv" 2>"$tmp/ll.err" ||
        { echo "error: llama-bench failed on $b: $(tail -n 1 "$tmp/ll.err")" >&2; continue; }
    for test in pp tg; do
        n=$P; [ $test = tg ] && n=$N
        [ "$n" -gt 0 ] || continue
        mr=$(awk -F, -v t=$test 'NR > 1 && $5 == t { print $8 }' "$tmp/mr.csv")
        # llama-bench csv: quoted fields, header names n_prompt, n_gen, avg_ts
        ll=$(awk -F, -v t=$test '
            { gsub(/"/, "") }
            NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
            (t == "pp" && $col["n_prompt"] > 0 && $col["n_gen"] == 0) || (t == "tg" && $col["n_gen"] > 0 && $col["n_prompt"] == 0) { print $col["avg_ts"] }' "$tmp/ll.csv")
        ratio=$(awk -v a="$mr" -v b="$ll" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else print "?" }')
        printf '| %s | %s%d | %.2f | %.2f | %s |\n' "$b" $test "$n" "$mr" "$ll" "$ratio"
    done
done
