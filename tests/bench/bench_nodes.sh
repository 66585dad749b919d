#!/usr/bin/env bash
# Cross-node all-reduce bandwidth over a real (virtual) link: bench_allreduce on 2 nodes x 2
# ranks in network namespaces (tests/nodes/lib.sh: veth pairs on a private bridge, ranks on
# different nodes talking over TCP, ranks on one node over shared memory), every algorithm
# next to MPI_Allreduce on the same buffers. Also the 4 ranks on one host (shared memory
# only), to show what the link costs. Not in CI (root, minutes); run by hand:
#   tests/bench/bench_nodes.sh BENCH_ALLREDUCE [max_mb=64] [reps=10]
# The link is a veth pair through a bridge, all in one kernel: its bandwidth is the machine's
# memory copy speed through the TCP stack, not a NIC's; ratios between algorithms are what
# carries over. The numbers are noisy on a shared machine: run it when the machine is quiet.
set -uo pipefail
bench=$(realpath "$1") max_mb=${2:-64} reps=${3:-10}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/../nodes/lib.sh"
nodes_up 2
echo "== 2 nodes x 2 ranks over TCP (veth + bridge), $(getconf _NPROCESSORS_ONLN) cores"
mwn_mpirun 2 2 "$bench" "$max_mb" "$reps"
rc=$?
echo "== 1 node x 4 ranks (shared memory), for comparison"
mpirun -n 4 --oversubscribe --bind-to none "$bench" "$max_mb" "$reps"
exit $rc
