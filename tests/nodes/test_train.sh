#!/usr/bin/env bash
# Training across real nodes over TCP (lib.sh), each node with its own private disk:
#   - 2 nodes x 2 ranks computes the gradients 1 x 1 does, as tests/mpi/test_layout.sh on one
#     host: one SGD step of lr 1 from the same initial weights, the updates within 1e-4 of the
#     largest (cmp_weights A B 1e-4 W0; the tolerance is argued there: float32 sums of up to
#     43264 terms in another order), the same losses to the printed digit; the control, the
#     same step with one example fewer (global batch 63), differs by more than 1e-2;
#   - the same 2 x 2 run (20 Adam steps) twice is bitwise equal;
#   - checkpoints and summaries appear on the chief's node (node1) only: node2's and the
#     launcher's disks stay empty;
#   - --resume on another node layout (3 nodes x 1 from the 2 x 2 checkpoints) restores the
#     last checkpoint on the chief's node and completes the next epoch.
#   test_train.sh MWTRAIN CMP_WEIGHTS [layout|other]
# PART layout is the first-step comparison alone (meson's 'train-layout', in suite 'isa' too),
# other the rest ('train'); neither: both.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
mw=$(realpath "$1") cmp=$(realpath "$2") part=${3:-all}
want() { [[ $part == all || $part == "$1" ]]; }
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/lib.sh"
nodes_up 3
# global batch 64 in every layout (the default CNN, as test_layout.sh)
common=(train --epochs 1 --progress none --collective-timeout 120 --threads 1 --test-examples 500)
step1=(--optimizer sgd --learning-rate 1 --steps-per-epoch 1 --checkpoint-every-epochs 0
       --summary-dir "")
run() { # NAME NODES PPN [flags...]
    local name=$1 nn=$2 ppn=$3
    shift 3
    mwn_mpirun "$nn" "$ppn" "$mw" "${common[@]}" --batch-per-replica $((64 / (nn * ppn))) \
        --dump-weights "$MWN_DISK/$name.bin" "$@" >"$MWN_ROOT/$name.out" 2>&1
    local rc=$?
    sed -n 's/^Epoch 1, Loss: \([0-9.]*\),.*Test Loss: \([0-9.]*\),.*/\1 \2/p' \
        "$MWN_ROOT/$name.out" >"$MWN_ROOT/$name.loss"
    echo "$name: exit $rc, losses $(cat "$MWN_ROOT/$name.loss")"
    check '[[ $rc -eq 0 ]]' "$name exits 0: $(tail -n 3 "$MWN_ROOT/$name.out")"
}
w() { echo "$MWN_ROOT/disk/node1/$1.bin"; } # --dump-weights is written by the chief, on node1
if want layout; then
    run w0 1 1 --epochs 0 --checkpoint-every-epochs 0 --summary-dir ""
    run s1-1x1 1 1 "${step1[@]}"
    run s1-2x2 2 2 "${step1[@]}"
    run s1-63 1 1 "${step1[@]}" --batch-per-replica 63
    check '"$cmp" "$(w s1-1x1)" "$(w s1-2x2)" 1e-4 "$(w w0)"' \
        "2 x 2's first-step gradients equal 1 x 1's within 1e-4"
    check '! "$cmp" "$(w s1-1x1)" "$(w s1-63)" 1e-2 "$(w w0)"' \
        "the control, one example fewer, differs by more than 1e-2"
    # printed with 4 decimals: equal up to one unit of the last digit
    check 'awk -v a="$(cat "$MWN_ROOT/s1-1x1.loss")" -v b="$(cat "$MWN_ROOT/s1-2x2.loss")" \
        "BEGIN { split(a, x); split(b, y); d1 = x[1] - y[1]; d2 = x[2] - y[2];
                 exit !(x[1] > 0 && d1 * d1 <= 1.0201e-8 && d2 * d2 <= 1.0201e-8) }"' \
        "2 x 2 losses equal 1 x 1's: $(cat "$MWN_ROOT/s1-1x1.loss"), $(cat "$MWN_ROOT/s1-2x2.loss")"
fi
if ! want other; then
    finish
    exit
fi

run 2x2 2 2 --steps-per-epoch 20 --checkpoint-dir "$MWN_DISK/ckpt" --summary-dir "$MWN_DISK/logs" \
    --checkpoint-every-epochs 1
run 2x2-again 2 2 --steps-per-epoch 20 --checkpoint-every-epochs 0 --summary-dir ""
check '"$cmp" "$(w 2x2)" "$(w 2x2-again)"' "2 x 2 twice is bitwise equal"

# the chief's node holds the checkpoints and the summaries; no other node has anything
on1=$(cd "$MWN_ROOT/disk/node1" && find ckpt logs -type f 2>/dev/null | sort | tr '\n' ' ')
echo "node1: $on1"
check '[[ -f $MWN_ROOT/disk/node1/ckpt/checkpoint && -f $MWN_ROOT/disk/node1/ckpt/ckpt-1 ]]' \
    "checkpoints on node1 (has: $on1)"
check '[[ -f $MWN_ROOT/disk/node1/logs/metrics.csv ]] && ls "$MWN_ROOT"/disk/node1/logs/*tfevents* >/dev/null 2>&1' \
    "summaries (metrics.csv, event file) on node1 (has: $on1)"
for d in node2 node3 launcher; do
    other=$(find "$MWN_ROOT/disk/$d" -mindepth 1 | tr '\n' ' ')
    check '[[ -z $other ]]' "nothing written on $d (found: $other)"
done

# --resume on 3 nodes x 1, global batch 63 (3 x 21): the chief, on node1 again, restores the
# 2 x 2 job's checkpoint from its own disk and broadcasts it; the job trains epoch 2
mwn_mpirun 3 1 "$mw" train --epochs 2 --steps-per-epoch 20 --progress none --threads 1 \
    --test-examples 500 --collective-timeout 120 --batch-per-replica 21 --resume \
    --checkpoint-dir "$MWN_DISK/ckpt" --summary-dir "$MWN_DISK/logs" >"$MWN_ROOT/resume.out" 2>&1
rc=$?
grep -o "restoring .*" "$MWN_ROOT/resume.out" | head -n 1
check '[[ $rc -eq 0 ]]' "resume on 3 nodes x 1 exits 0: $(tail -n 3 "$MWN_ROOT/resume.out")"
check 'grep -q "restoring .*ckpt-1 " "$MWN_ROOT/resume.out"' "resume restored node1's ckpt-1"
check 'grep -q "^Epoch 2," "$MWN_ROOT/resume.out" && ! grep -q "^Epoch 1," "$MWN_ROOT/resume.out"' \
    "resume trained epoch 2 only"
check '[[ -f $MWN_ROOT/disk/node1/ckpt/ckpt-2 && -z $(find "$MWN_ROOT/disk/node2" "$MWN_ROOT/disk/node3" -mindepth 1) ]]' \
    "the resumed job's checkpoint is on node1 only"
finish
