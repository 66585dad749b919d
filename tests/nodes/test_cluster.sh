#!/usr/bin/env bash
# `mwtrain cluster` on real nodes (lib.sh): 2 nodes x 2 ranks and 3 nodes x 1, without a
# TF_CONFIG (nodes found by MPI) and with one naming the nodes' hostnames; the table must show
# each rank on its node by hostname (node1 node1 node2 node2 / node1 node2 node3) and the
# cluster line the number of nodes.
#   test_cluster.sh MWTRAIN
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
mw=$(realpath "$1")
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/lib.sh"
nodes_up 3
tfconfig() { # NODES PPN -> a TF_CONFIG with worker i on node (i / PPN) + 1
    local w="" i
    for ((i = 0; i < $1 * $2; i++)); do w+="${w:+,}\"node$((i / $2 + 1)):$((2222 + i % $2))\""; done
    echo "{\"cluster\":{\"worker\":[$w]},\"task\":{\"type\":\"worker\",\"index\":0}}"
}
for layout in "2 2" "3 1"; do
    read -r nn ppn <<<"$layout"
    want=$(for ((i = 0; i < nn * ppn; i++)); do echo -n "node$((i / ppn + 1)) "; done)
    for tf in none json; do
        out=$MWN_ROOT/cluster-$nn-$ppn-$tf.out
        if [[ $tf == none ]]; then
            mwn_mpirun "$nn" "$ppn" "$mw" cluster >"$out" 2>&1
        else
            TF_CONFIG=$(tfconfig "$nn" "$ppn") mwn_mpirun "$nn" "$ppn" -x TF_CONFIG "$mw" cluster \
                >"$out" 2>&1
        fi
        rc=$?
        hosts=$(awk '$1 ~ /^[0-9]+$/ { printf "%s ", $4 }' "$out")
        echo "$nn x $ppn, TF_CONFIG $tf: $(head -n 1 "$out")"
        echo "  hosts by rank: $hosts"
        check '[[ $rc -eq 0 ]]' "$nn x $ppn ($tf): exit $rc: $(tail -n 3 "$out")"
        check '[[ $hosts == "$want" ]]' "$nn x $ppn ($tf): hosts '$hosts', expected '$want'"
        check 'grep -q "^cluster: $((nn * ppn)) ranks .* on $nn nodes" "$out"' \
            "$nn x $ppn ($tf): the cluster line names $nn nodes"
    done
done
finish
