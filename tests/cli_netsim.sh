#!/bin/sh
# Expert parallelism across simulated hosts (bench/netsim.sh: a network namespace and hostname per
# rank, veth links to a bridge, Open MPI's TCP transport with shared memory off, ranks launched through
# an agent that enters the namespace instead of ssh): logits byte-identical to one process at 2 ranks
# resident and 3 ranks paged (a 2 MiB arena on every rank), qwen3moe (kjv-moe) and deepseek4; the
# bytes crossed rank 1's link. Skipped without root, iproute2, Open MPI or the MPI build.
. tests/lib.sh
MPIBIN=$(cd "$(dirname "$MOERUN")" && pwd)/mpi/moerun
if [ "$(id -u)" != 0 ] || ! command -v ip >/dev/null 2>&1 || ! command -v mpirun >/dev/null 2>&1 || ! command -v unshare >/dev/null 2>&1; then
  skip netsim "needs root, iproute2, util-linux unshare and Open MPI"; exit 0
fi
[ -x "$MPIBIN" ] || { skip netsim "no MPI build ($MPIBIN; make test builds it when mpicc is installed)"; exit 0; }
export NETSIM_NAME=mrs$(( $$ % 100000 ))
trap 'sh bench/netsim.sh down 3 >/dev/null 2>&1; rm -rf "$TMPD"' EXIT
if ! sh bench/netsim.sh up 3 2>"$TMPD/up.err"; then
  skip netsim "cannot create network namespaces here: $(head -c 200 "$TMPD/up.err")"; exit 0
fi
# the probe: mpirun launching over TCP into the namespaces (a machine where it cannot is skipped)
if [ "$(timeout 60 sh bench/netsim.sh run 2 hostname 2>"$TMPD/probe.err" | sort | tr '\n' ' ')" = "rank0 rank1 " ]; then ok netsim_hosts
else skip netsim "mpirun cannot launch ranks in the namespaces here: $(head -c 300 "$TMPD/probe.err")"; exit 0; fi
ids=1,200,300,400,500,17,33,99,1000,42,7,512
for M in kjv-moe-q8_0 tiny-deepseek4-iq3s-mxfp4; do
  F=$(cd "$SHARED/models" && pwd)/$M.gguf
  "$MOERUN" logits -m "$F" --tokens $ids -o "$TMPD/one.lgts" -t 1 2>/dev/null || { fail "netsim_$M" "one process failed"; continue; }
  for np in 2 3; do
    bud=""; [ $np = 3 ] && bud="--ram-budget 2M"
    name=netsim_${M}_np$np$( [ -n "$bud" ] && echo _paged)
    rx0=$(cat "/sys/class/net/${NETSIM_NAME}v1/statistics/rx_bytes" 2>/dev/null || echo 0)
    # shellcheck disable=SC2086
    timeout 120 sh bench/netsim.sh run $np "$MPIBIN" logits -m "$F" --tokens $ids -o "$TMPD/ep.lgts" -t 1 --ep $bud >"$TMPD/o" 2>"$TMPD/e"
    rx1=$(cat "/sys/class/net/${NETSIM_NAME}v1/statistics/rx_bytes" 2>/dev/null || echo 0)
    if cmp -s "$TMPD/one.lgts" "$TMPD/ep.lgts" && grep -q "rank 1 of $np served [1-9]" "$TMPD/e" && [ $((rx1 - rx0)) -gt 10000 ]; then
      ok "$name"
    else fail "$name" "link bytes $((rx1 - rx0)); $(tail -n 3 "$TMPD/e" | head -c 400)"; fi
    rm -f "$TMPD/ep.lgts"
  done
done
