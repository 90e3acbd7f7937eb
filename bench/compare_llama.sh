#!/bin/sh
# Side-by-side speed of moerun and the reference llama.cpp (llama-bench) on the same GGUF files, same
# threads, nice'd. On a shared machine compare ratios measured next to each other: each round runs
# moerun then llama-bench on every model; the summary gives the median ratio over the rounds.
#   bench/compare_llama.sh [-t 2] [-p 512] [-n 128] [-r 1] [-R 1] [-i avx2|avx512|scalar] MODEL.gguf...
# -i ISA: moerun runs with MOERUN_ISA=ISA (compare against a llama.cpp built for that ISA, e.g. an
# AVX2-only build on an AVX-512 machine); the header names the ISA moerun used.
# LLAMA_BENCH: path of llama-bench (default /work/ref/build-ISA/bin/llama-bench, ISA avx512 unless -i;
# not built here).
# MOERUN: path of moerun (default build/moerun). Output: markdown tables on stdout.
T=2; P=512; N=128; R=1; ROUNDS=1; ISA=
while [ $# -gt 0 ]; do
    case "$1" in
    -t) T=$2; shift 2;; -p) P=$2; shift 2;; -n) N=$2; shift 2;; -r) R=$2; shift 2;; -R) ROUNDS=$2; shift 2;;
    -i) ISA=$2; shift 2;;
    -h|--help) sed -n '2,10p' "$0"; exit 0;;
    *) break;;
    esac
done
[ $# -ge 1 ] || { echo "usage: $0 [-t T] [-p P] [-n N] [-r R] [-R ROUNDS] [-i ISA] MODEL.gguf..." >&2; exit 1; }
[ -n "$ISA" ] && export MOERUN_ISA="$ISA"
LLAMA_BENCH=${LLAMA_BENCH:-/work/ref/build-${ISA:-avx512}/bin/llama-bench}
MOERUN=${MOERUN:-build/moerun}
[ -x "$LLAMA_BENCH" ] || { echo "error: llama-bench not found at $LLAMA_BENCH (set LLAMA_BENCH)" >&2; exit 1; }
export LD_LIBRARY_PATH="$(dirname "$LLAMA_BENCH")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
: >"$tmp/all"

echo "# $(date -u +%FT%TZ) $(nproc) CPUs, threads $T, pp$P / tg$N, $R repetition(s) x $ROUNDS round(s), moerun ISA ${MOERUN_ISA:-best}, llama-bench $LLAMA_BENCH"
echo "| round | load avg | model | test | moerun t/s | llama.cpp t/s | ratio |"
echo "|---:|---:|---|---|---:|---:|---:|"
round=1
while [ $round -le "$ROUNDS" ]; do
    for m in "$@"; do
        b=$(basename "$m")
        load=$(cut -d' ' -f1 /proc/loadavg)
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
            ratio=$(awk -v a="$mr" -v b="$ll" 'BEGIN { if (b > 0) printf "%.3f", a / b; else print 0 }')
            printf '| %d | %s | %s | %s%d | %.2f | %.2f | %.2fx |\n' $round "$load" "$b" $test "$n" "$mr" "$ll" "$ratio"
            echo "$b $test$n $ratio" >>"$tmp/all"
        done
    done
    round=$((round + 1))
done
if [ "$ROUNDS" -gt 1 ]; then
    echo
    echo "| model | test | median ratio | min | max |"
    echo "|---|---|---:|---:|---:|"
    cut -d' ' -f1,2 "$tmp/all" | sort -u | while read -r b t; do
        awk -v b="$b" -v t="$t" '$1 == b && $2 == t { print $3 }' "$tmp/all" | sort -g |
            awk -v b="$b" -v t="$t" '{ v[NR] = $1 } END { med = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2;
                printf "| %s | %s | %.2fx | %.2fx | %.2fx |\n", b, t, med, v[1], v[NR] }'
    done
fi
