#!/usr/bin/env bash
# Every all-reduce algorithm equals the sequential sum across real nodes over TCP: the driver
# of the mpi suite (tests/mpi/test_allreduce.c: integer-valued floats, exact in any order,
# compared with memcmp; counts 0, 1, 7, P-1, a prime, 1M, the CNN's gradient) on NODES nodes x
# PPN ranks in network namespaces (lib.sh). The driver's layout line must show NODES nodes.
#   test_allreduce.sh TEST_ALLREDUCE NODES PPN
set -uo pipefail
drv=$(realpath "$1") nn=$2 ppn=$3
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/lib.sh"
nodes_up "$nn"
mwn_mpirun "$nn" "$ppn" "$drv" >"$MWN_ROOT/out" 2>&1
rc=$?
grep -E "layout|passed" "$MWN_ROOT/out"
if ((rc != 0)); then
    echo "FAIL: the driver exited $rc"
    grep -v '^ *$' "$MWN_ROOT/out" | tail -n 20
    exit 1
fi
if ! grep -q "^layout: $((nn * ppn)) ranks, $nn node(s) x $ppn local" "$MWN_ROOT/out"; then
    echo "FAIL: expected $nn node(s) x $ppn local ranks"
    exit 1
fi
echo "ok: every algorithm equals the sequential sum on $nn nodes x $ppn over TCP"
