#!/bin/sh
# Simulated hosts on one machine for expert parallelism over a real network stack (docs/MULTIHOST.md
# "Simulated hosts"): one network namespace per rank with its own hostname (a UTS namespace per
# launched process), veth links to a bridge, optionally shaped (tbf rate; netem delay / loss where
# the kernel has sch_netem), Open MPI's TCP transport between them (shared memory off), ranks started
# by mpirun through an agent that enters the rank's namespace instead of ssh. Needs root, iproute2 and
# Open MPI.
#   sh bench/netsim.sh up N [RATE [DELAY [LOSS]]]   e.g. up 3 10gbit 100us 0.1%
#   sh bench/netsim.sh run N ARGS...                mpirun -np N over the namespaces: ARGS is the program
#   sh bench/netsim.sh down N
# Rank i lives in namespace ${NETSIM_NAME:-mrsim}$i at 10.77.0.$((i+1)); mpirun runs in ${P}0. On real hosts the same
# mpirun command line is used with --host (or a hostfile) and ssh as the agent.
set -u
cmd=${1:-}; N=${2:-2}
[ -n "$cmd" ] && shift 2 2>/dev/null || { echo "usage: $0 up|run|down N ..." >&2; exit 2; }
P=${NETSIM_NAME:-mrsim}   # prefix of the namespaces, links and bridge (at most 8 characters)
AGENT=/tmp/$P-agent.sh
up() (
  set -e
  rate=${1:-}; delay=${2:-}; loss=${3:-}
  ip link add ${P}br type bridge
  ip link set ${P}br up
  i=0
  while [ $i -lt "$N" ]; do
    ip netns add $P$i
    ip link add ${P}v$i type veth peer name eth0 netns $P$i
    ip link set ${P}v$i master ${P}br up
    ip netns exec $P$i ip link set lo up
    ip netns exec $P$i ip addr add 10.77.0.$((i + 1))/24 dev eth0
    ip netns exec $P$i ip link set eth0 up
    for side in "ip netns exec $P$i tc qdisc add dev eth0" "tc qdisc add dev ${P}v$i"; do
      if [ -n "$delay$loss" ]; then
        # shellcheck disable=SC2086
        $side root netem ${delay:+delay $delay} ${loss:+loss $loss} ${rate:+rate $rate} ||
          { echo "netsim: netem is not available in this kernel (sch_netem)" >&2; exit 3; }
      elif [ -n "$rate" ]; then
        # shellcheck disable=SC2086
        $side root tbf rate "$rate" burst 256kb latency 10ms || exit 3
      fi
    done
    i=$((i + 1))
  done
  # the launch agent: "AGENT HOST CMD..." runs CMD in HOST's namespace under its own hostname
  cat >"$AGENT" <<AG
#!/bin/sh
host=\$1; shift
while [ "\${1#-}" != "\$1" ]; do shift; done
i=\$(( \${host##*.} - 1 ))
exec ip netns exec $P\$i unshare --uts sh -c 'hostname "rank\$0"; exec "\$@"' "\$i" sh -c "\$*"
AG
  chmod +x "$AGENT"
)
down() {
  i=0
  while [ $i -lt "$N" ]; do ip netns del $P$i 2>/dev/null; ip link del ${P}v$i 2>/dev/null; i=$((i + 1)); done
  ip link del ${P}br 2>/dev/null
  rm -f "$AGENT"
  return 0
}
run() {
  hosts=10.77.0.1
  i=1
  while [ $i -lt "$N" ]; do hosts="$hosts,10.77.0.$((i + 1))"; i=$((i + 1)); done
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 exec ip netns exec ${P}0 unshare --uts sh -c 'hostname rank0; exec "$@"' sh \
    mpirun --oversubscribe -np "$N" --host "$(echo "$hosts" | sed 's/,/:1,/g'):1" \
      --mca plm_rsh_agent "$AGENT" --mca btl tcp,self --mca btl_tcp_if_include 10.77.0.0/24 \
      --mca oob_tcp_if_include 10.77.0.0/24 --mca plm_rsh_no_tree_spawn 1 "$@"
}
case "$cmd" in
  up) up "$@" ;;
  down) down ;;
  run) run "$@" ;;
  *) echo "usage: $0 up|run|down N ..." >&2; exit 2 ;;
esac
