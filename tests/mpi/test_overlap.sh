#!/usr/bin/env bash
# --overlap-allreduce on trains bitwise the same weights as off (worker/replicas/overlap.h): the
# buckets all-reduced while the backward runs add every gradient in the same order as one
# all-reduce after it. For each layout (1 rank with 2 threads, 2 ranks, 1 rank x 2 replicas,
# 4 ranks on one node, 2 nodes x 2 via a fake TF_CONFIG) and each model (the tutorial CNN; a
# BatchNormalization model, whose slice is one backward on thread 0 and whose moving
# statistics ride in the gradients; a causal Transformer on a text corpus with a kernel and a
# bias regularizer, whose gradients the buckets add), 4 Adam steps with --micro-batch 4 (several
# micro-batches per thread), --dump-weights compared with cmp against off for bucket sizes 0 (a
# bucket per layer) and 0.02 MiB (a bucket closes once it holds that), and for the CNN
# the default too (one bucket for these small models: the whole gradient at once).
# The ring of 4 ranks (--allreduce ring): each chunk's sum starts at its own rank, so a bucket
# is cut by the whole buffer's chunks, and trains as off too; so does hierarchical over 3
# nodes x 2 (its ring across nodes cuts by the whole shard's chunks). Fallback: MPI's own all-reduce on
# 4 ranks warns and trains as off. Control: the ring's weights differ bitwise from the
# hierarchical all-reduce's, so the comparison sees a changed summation order.
# Fault: rank 1 stopped at its first bucket (MW_FAULT=stop:bucket:1) ends the job with exit 131
# within the collective timeout plus a little, the message naming rank 1.
#   test_overlap.sh MWTRAIN
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
mw=$1
tmp=$(mktemp -d)
unset TF_CONFIG MW_FAULT
cleanup() {
    pkill -CONT -f "$tmp/" 2>/dev/null
    pkill -9 -f "$tmp/" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
src=${MW_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
corpus=/usr/share/common-licenses/GPL-3
common=(train --epochs 1 --steps-per-epoch 4 --progress none --collective-timeout 60
        --checkpoint-every-epochs 0 --summary-dir "" --test-examples 32 --micro-batch 4)
sed 's/"synchronized": true/"synchronized": false/' "$src/tests/data/keras/graph/syncbn_k3.json" \
    >"$tmp/bn.json"
fake2x2='{"cluster":{"worker":["node-a:2222","node-a:2223","node-b:2222","node-b:2223"]},"task":{"type":"worker","index":0}}'
fake3x2='{"cluster":{"worker":["node-a:2222","node-a:2223","node-b:2222","node-b:2223","node-c:2222","node-c:2223"]},"task":{"type":"worker","index":0}}'

# run NAME RANKS RPW [ENV...] -- FLAGS...: global batch 32; exit 0 and a dump, or a failure
run() {
    local name=$1 n=$2 rpw=$3
    shift 3
    local envs=()
    while [[ $1 != -- ]]; do envs+=("$1"); shift; done
    shift
    env "${envs[@]}" timeout 300 mpiexec -n "$n" "$mw" "${common[@]}" \
        --batch-per-replica $((32 / (n * rpw))) --replicas-per-worker "$rpw" "$@" \
        --dump-weights "$tmp/$name.bin" >"$tmp/$name.out" 2>&1
    local rc=$?
    check '[[ $rc -eq 0 && -s $tmp/$name.bin ]]' "$name: exit $rc: $(tail -n 3 "$tmp/$name.out")"
}

# same A B: bitwise equal dumps
same() {
    check "cmp -s $tmp/$1.bin $tmp/$2.bin" "$1 and $2: bitwise equal weights"
}

models=(cnn bn lm)
lm=(--model "$src/tests/data/keras/graph/overlap_lm.json" --data "$corpus" --sequence-length 32)
declare -A mflags=([cnn]="" [bn]="--model $tmp/bn.json"
                   [lm]="--model $src/tests/data/keras/graph/overlap_lm.json --data $corpus --sequence-length 32")
layouts=(1x1 2x1 1x2rep 4x1 2nodes-x2)
for m in "${models[@]}"; do
    read -ra f <<<"${mflags[$m]}"
    for l in "${layouts[@]}"; do
        case $l in
        1x1) lay=(1 1 --) extra=(--threads 2) ;;
        2x1) lay=(2 1 --) extra=() ;;
        1x2rep) lay=(1 2 --) extra=(--threads 2) ;;
        4x1) lay=(4 1 --) extra=() ;;
        2nodes-x2) lay=(4 1 TF_CONFIG="$fake2x2" --) extra=() ;;
        esac
        run "$m-$l-off" "${lay[@]}" "${f[@]}" "${extra[@]}" --overlap-allreduce off
        buckets=(0 0.02)
        [[ $m == cnn ]] && buckets+=(4)
        for b in "${buckets[@]}"; do
            run "$m-$l-on$b" "${lay[@]}" "${f[@]}" "${extra[@]}" --overlap-allreduce on \
                --bucket-mb "$b"
            same "$m-$l-off" "$m-$l-on$b"
        done
        check 'grep -q "overlapped all-reduce: [0-9]* bucket(s) (--bucket-mb 0)" \
               "$tmp/$m-$l-on0.out"' "$m-$l: the overlap ran: $(grep -i overlap "$tmp/$m-$l-on0.out")"
    done
done
# a bucket per layer is several buckets: the CNN's 4 layers with weights
check 'grep -q "overlapped all-reduce: 4 bucket(s)" "$tmp/cnn-2x1-on0.out"' "cnn: 4 buckets"

# the ring of 4 ranks: each bucket cut by the whole buffer's chunks (mw_ring_sum_part), a
# bucket per layer and a bucket that straddles the chunk boundaries of the 4 ranks
run ring-off 4 1 -- --allreduce ring --overlap-allreduce off
for b in 0 0.02; do
    run "ring-on$b" 4 1 -- --allreduce ring --overlap-allreduce on --bucket-mb "$b"
    same ring-off "ring-on$b"
done
check 'grep -q "overlapped all-reduce: 4 bucket(s)" "$tmp/ring-on0.out"' "ring of 4: overlapped"
run lm-ring-off 4 1 -- "${lm[@]}" --allreduce ring --overlap-allreduce off
run lm-ring-on 4 1 -- "${lm[@]}" --allreduce ring --overlap-allreduce on --bucket-mb 0
same lm-ring-off lm-ring-on
# hierarchical over 3 nodes x 2 (a fake TF_CONFIG): buckets cut by the node shards, the ring
# across the 3 nodes by the whole shard's chunks
run h3-off 6 1 TF_CONFIG="$fake3x2" -- --allreduce hierarchical --overlap-allreduce off
for b in 0 0.02; do
    run "h3-on$b" 6 1 TF_CONFIG="$fake3x2" -- --allreduce hierarchical --overlap-allreduce on \
        --bucket-mb "$b"
    same h3-off "h3-on$b"
done
check 'grep -q "overlapped all-reduce: 4 bucket(s)" "$tmp/h3-on0.out"' "3 nodes x 2: overlapped"
# fallback: MPI's own all-reduce on 4 ranks cuts each range its own way: a warning and the
# serial path
run mpi-off 4 1 -- --allreduce mpi --overlap-allreduce off
run mpi-on 4 1 -- --allreduce mpi --overlap-allreduce on --bucket-mb 0
same mpi-off mpi-on
check 'grep -q "warning: --overlap-allreduce on: not used here (this all-reduce on 3 or more" \
       "$tmp/mpi-on.out"' "mpi on 4 ranks: the warning: $(grep -i overlap "$tmp/mpi-on.out")"
# control: the ring's and the hierarchical all-reduce's orders give other bits
check '! cmp -s "$tmp/ring-off.bin" "$tmp/cnn-4x1-off.bin"' \
    "control: the ring's and the hierarchical all-reduce's weights differ bitwise"

# fault: rank 1 stops at its first bucket; rank 0's all-reduce times out naming it
T=5
start=$(date +%s.%N)
timeout 120 mpiexec -n 2 -x MW_FAULT=stop:bucket:1 "$mw" "${common[@]}" --batch-per-replica 16 \
    --overlap-allreduce on --bucket-mb 0 --collective-timeout $T \
    --checkpoint-dir "$tmp/ck-fault" >"$tmp/fault.out" 2>&1
rc=$?
for _ in 1 2 3 4 5; do
    pgrep -f "$tmp/ck-fault" >/dev/null || break
    sleep 0.2
done
took=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
left=$(pgrep -fc "$tmp/ck-fault")
echo "fault: exit $rc after $took s ($left left)"
check '[[ $rc -eq 131 ]]' "fault: exit 131 (got $rc): $(tail -n 3 "$tmp/fault.out")"
check 'awk -v t="$took" -v m=$((T + 30)) "BEGIN { exit !(t <= m) }"' \
    "fault: over within --collective-timeout + 30 s (took $took s)"
check '[[ $left -eq 0 ]]' "fault: no process left ($left)"
check 'grep -Eq "collective timeout: .* waited $T s for rank 1" "$tmp/fault.out"' \
    "fault: the message names rank 1: $(grep -i error "$tmp/fault.out")"
finish overlap
