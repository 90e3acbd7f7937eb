#!/bin/sh
# make bench-paged: paged inference on a DeepSeek-V4-Flash-width model larger than the memory the run
# may use (docs/PAGING.md "At scale"). Steps:
#   1. synthesizes MODEL if it is missing (moerun synth --shape deepseek-v4-flash --mix MIX --layers LAYERS)
#   2. measures the device under it: O_DIRECT reads of 4 MiB (about one expert matrix) at queue depth
#      1..32, random and sequential (build/bench/bench_io)
#   3. for each round, arena and variant: drops the page cache (when root), runs
#      `moerun bench -m MODEL -p P -n N -r 1 -t T --ram-budget ARENA` inside a memory cgroup limited to
#      ARENA + EXTRA (so the process really cannot use more: the model is several times that), under
#      /usr/bin/time -v, and collects tok/s, hit rate, Belady, GiB read, read stall, I/O busy time,
#      read GB/s while busy, decode's I/O efficiency, user / system CPU seconds, minor page faults,
#      peak RSS and the cgroup's peak
#   4. optionally the reference llama.cpp (LLAMA_BENCH=path/to/llama-bench) on the same file, same limit
# Output: a markdown table on stdout and in $OUT.md, raw logs in $OUT.d/.
#
#   MODEL=/work/models/ds4-12L.gguf LAYERS=12 MIX=iq3s-mxfp4 ZIPF=0     the model (made if missing)
#   ARENAS="4G 6G 10G 16G"  EXTRA=3G  P=32 N=16 T=2 ROUNDS=1            the runs
#   VARIANTS="base=MOERUN_PAGER_IO_THREADS=4 new="                      A/B: name=ENV,ENV (alternated);
#            MOERUN=path among the ENVs runs that binary (e.g. another commit's build);
#            APPROX=spec runs it with --moe-approx spec, '+' between keys (APPROX=sub_margin=1+sub_w=0.1)
#   DEVICE=1  (0 skips step 2)   DROP=1 (0: keep the page cache)   OUT=build/paged_scale
# The variants are alternated inside each round so that A and B see the same machine load; the load
# average is printed with every run. Needs root for the cgroup and for dropping the page cache; without
# it the runs are unlimited and the table says so.
set -e
BUILD=${BUILD:-build}
MOERUN=${MOERUN:-$BUILD/moerun}
MODEL=${MODEL:-/work/models/ds4-12L.gguf}
LAYERS=${LAYERS:-12}
MIX=${MIX:-iq3s-mxfp4}
ZIPF=${ZIPF:-0}
ARENAS=${ARENAS:-4G 6G 10G 16G}
EXTRA=${EXTRA:-3G}
P=${P:-32}
N=${N:-16}
T=${T:-2}
ROUNDS=${ROUNDS:-1}
VARIANTS=${VARIANTS:-default=}
DEVICE=${DEVICE:-1}
DROP=${DROP:-1}
OUT=${OUT:-$BUILD/paged_scale}
mkdir -p "$OUT.d"

bytes() { # 4G, 512M, 1.5G -> bytes
    echo "$1" | awk '{ v = $1 + 0; u = toupper(substr($1, length($1))); m = 1
        if (u == "K") m = 1024; else if (u == "M") m = 1048576; else if (u == "G") m = 1073741824
        printf "%.0f\n", v * m }'
}

if [ ! -f "$MODEL" ]; then
    echo "# synthesizing $MODEL ($LAYERS layers, $MIX, zipf $ZIPF)"
    "$MOERUN" synth -o "$MODEL" --shape deepseek-v4-flash --mix "$MIX" --layers "$LAYERS" --zipf "$ZIPF"
fi
MODEL_GIB=$(stat -c %s "$MODEL" | awk '{ printf "%.2f", $1 / 1073741824 }')

drop_caches() {
    [ "$DROP" = 1 ] || return 0
    sync
    if [ -w /proc/sys/vm/drop_caches ]; then echo 3 > /proc/sys/vm/drop_caches; fi
}

CG_KIND=none
if [ -d /sys/fs/cgroup/memory ] && [ -w /sys/fs/cgroup/memory ]; then CG_KIND="v1 memory.limit_in_bytes"
elif grep -qw memory /sys/fs/cgroup/cgroup.controllers 2>/dev/null && [ -w /sys/fs/cgroup ]; then CG_KIND="v2 memory.max"
fi
# a memory cgroup limited to $1 bytes; prints its directory (empty when none can be made)
make_cgroup() {
    d=""
    if [ -d /sys/fs/cgroup/memory ] && [ -w /sys/fs/cgroup/memory ]; then # v1
        d=/sys/fs/cgroup/memory/moerun-bench-$$
        mkdir -p "$d" && echo "$1" > "$d/memory.limit_in_bytes" || d=""
    elif grep -qw memory /sys/fs/cgroup/cgroup.controllers 2>/dev/null && [ -w /sys/fs/cgroup ]; then # v2
        grep -qw memory /sys/fs/cgroup/cgroup.subtree_control || echo +memory > /sys/fs/cgroup/cgroup.subtree_control || true
        d=/sys/fs/cgroup/moerun-bench-$$
        mkdir -p "$d" && echo "$1" > "$d/memory.max" || d=""
    fi
    echo "$d"
}
cg_peak() { # bytes the group peaked at (v1 max_usage, v2 memory.peak where the kernel has it)
    if [ -f "$1/memory.max_usage_in_bytes" ]; then cat "$1/memory.max_usage_in_bytes"
    elif [ -f "$1/memory.peak" ]; then cat "$1/memory.peak"
    else echo 0; fi
}
run_limited() { # LIMIT_BYTES LOG cmd...: runs cmd in a fresh cgroup, prints the cgroup peak
    lim=$1; log=$2; shift 2
    cg=$(make_cgroup "$lim")
    if [ -n "$cg" ]; then
        sh -c 'echo $$ > "$0/cgroup.procs" && exec "$@"' "$cg" /usr/bin/time -v "$@" > "$log" 2>&1 || echo "(exit $?)" >> "$log"
        peak=$(cg_peak "$cg")
        rmdir "$cg" 2>/dev/null || true
    else
        /usr/bin/time -v "$@" > "$log" 2>&1 || echo "(exit $?)" >> "$log"
        peak=0
    fi
    echo "$peak"
}

{
echo "# paged scale benchmark, $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "model: $MODEL ($MODEL_GIB GiB, $(nproc) CPUs, $(awk '/MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo) RAM)"
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), MOERUN_ISA=${MOERUN_ISA:-auto}"
echo "runs: moerun bench -m MODEL -p $P -n $N -r 1 -t $T --ram-budget ARENA, memory limit ARENA + $EXTRA"
} | tee "$OUT.md"

if [ "$DEVICE" = 1 ]; then
    make -s "$BUILD/bench/bench_io" >/dev/null
    drop_caches
    echo '```' >> "$OUT.md"
    for mode in "" --seq; do
        "$BUILD/bench/bench_io" "$MODEL" --size 4M --qd 1,2,4,8,16,32 --mb 1024 $mode | tee -a "$OUT.md"
    done
    echo '```' >> "$OUT.md"
fi

{
echo
echo "| round | arena | variant | load | pp$P tok/s | tg$N tok/s | hit (all) | Belady | tg hit | tg static opt | GiB read | tg MiB/token | tg stall s | tg I/O busy s | GB/s busy | tg I/O eff | user s | sys s | minor faults | peak RSS GiB | cgroup peak GiB |"
echo "|---|---|---|---|---:|---:|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
} | tee -a "$OUT.md"

r=1
while [ "$r" -le "$ROUNDS" ]; do
    for A in $ARENAS; do
        lim=$(( $(bytes "$A") + $(bytes "$EXTRA") ))
        for V in $VARIANTS; do
            name=${V%%=*}
            envs=$(echo "${V#*=}" | tr ',' ' ')
            bin=$(echo "$envs" | tr ' ' '\n' | sed -n 's/^MOERUN=//p')
            [ -n "$bin" ] || bin=$MOERUN
            approx=$(echo "$envs" | tr ' ' '\n' | sed -n 's/^APPROX=//p' | tr '+' ' ')
            log="$OUT.d/r$r-$A-$name.log"
            drop_caches
            load=$(cut -d' ' -f1 /proc/loadavg)
            peak=$(run_limited "$lim" "$log" env $envs "$bin" bench -m "$MODEL" -p "$P" -n "$N" -r 1 -t "$T" --ram-budget "$A" ${approx:+--moe-approx "$approx"})
            awk -v r="$r" -v A="$A" -v name="$name" -v load="$load" -v peak="$peak" -v P="$P" -v N="$N" '
                /\| pp[0-9]+ \|/ { split($0, f, "|"); pp = f[7] + 0 }
                /\| tg[0-9]+ \|/ { split($0, f, "|"); tg = f[7] + 0 }
                /^pager: hot / { hit = $3 }
                /Belady/ { for (i = 1; i <= NF; i++) if ($i == "slots)") { bel = $(i+1); gsub(/,/, "", bel) } }
                /^pager: hot .* read / { for (i = 1; i <= NF; i++) if ($i == "read" && $(i+1) != "stall") { gib = $(i+1); u = $(i+2) } }
                /^pager: tg[0-9]* / { for (i = 1; i <= NF; i++) {
                    if ($i == "hit") th = $(i+1); if ($i == "stall") ts = $(i+1); if ($i == "busy") tb = $(i+1)
                    if ($i == "optimum") { so = $(i+1); gsub(/[),]/, "", so) }
                    if ($(i+1) ~ /^MiB\/token/) { x = $i; gsub(/[(]/, "", x); tm = x + 0 }
                    if ($i == "GB/s" && $(i+1) == "while") { gb = $(i-1); gsub(/[(]/, "", gb) } } }
                /^pager: decode I\/O efficiency .*\(tg/ { eff = $5 }
                /User time \(seconds\)/ { us = $NF }
                /System time \(seconds\)/ { sy = $NF }
                /Minor \(reclaiming a frame\) page faults/ { mf = $NF }
                /Maximum resident set size/ { rss = $NF / 1048576 }
                /^error|\(exit/ { err = err " " $0 }
                END {
                    if (u ~ /MiB/) gib = gib / 1024
                    if (err != "") { printf "| %s | %s | %s | %s | failed:%s |\n", r, A, name, load, err; exit }
                    printf "| %s | %s | %s | %s | %.2f | %.2f | %s | %s | %s | %s | %.1f | %.0f | %s | %s | %s | %s | %s | %s | %s | %.2f | %.2f |\n",
                        r, A, name, load, pp, tg, hit, bel, th, so, gib, tm, ts, tb, gb, eff, us, sy, mf, rss, peak / 1073741824 }' "$log" | tee -a "$OUT.md"
        done
    done
    r=$((r + 1))
done

if [ -n "$LLAMA_BENCH" ]; then
    for A in $ARENAS; do
        lim=$(( $(bytes "$A") + $(bytes "$EXTRA") ))
        log="$OUT.d/llama-$A.log"
        drop_caches
        load=$(cut -d' ' -f1 /proc/loadavg)
        peak=$(run_limited "$lim" "$log" "$LLAMA_BENCH" -m "$MODEL" -p "$P" -n "$N" -r 1 -t "$T")
        echo "llama.cpp, limit $A + $EXTRA, load $load, cgroup peak $(echo "$peak" | awk '{ printf "%.2f GiB", $1 / 1073741824 }'):" | tee -a "$OUT.md"
        grep -E '^\|' "$log" | tee -a "$OUT.md" || tail -3 "$log" | tee -a "$OUT.md"
    done
fi
echo "memory limit: cgroup $CG_KIND; logs in $OUT.d/" | tee -a "$OUT.md"
