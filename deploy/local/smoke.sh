#!/usr/bin/env bash
# Smoke test of a whole job on one CPU machine, as CI runs it: 4 ranks posing as 2 nodes x 2
# (a TF_CONFIG with hosts node-a and node-b, so the hierarchical all-reduce crosses "nodes"),
# a few steps that end in a checkpoint, a second run that resumes from it, and an eval of the
# result. Checks the exit codes, the checkpoint files and that the resumed run starts at
# epoch 2. Takes seconds.
#   deploy/local/smoke.sh [MWTRAIN]     (default: set up, build into build/, use that)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/env.sh"
if [[ $# -ge 1 ]]; then
    MWTRAIN=$1
else
    bash "$MW_ROOT/deploy/setup.sh"
    mw_build
    MWTRAIN=$MW_BUILD/worker/mwtrain
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ckpt=$tmp/ckpt
fail() {
    echo "smoke: FAIL: $*" >&2
    exit 1
}
# 4 ranks on a machine with fewer cores: --oversubscribe, and 1 thread each.
export TF_CONFIG='{"cluster":{"worker":["node-a:2222","node-a:2223","node-b:2222","node-b:2223"]},"task":{"type":"worker","index":0}}'

echo "smoke: cluster"
# mwtrain-command
timeout 120 mpirun -n 4 --oversubscribe "$MWTRAIN" cluster | tee "$tmp/cluster.out"
grep -q "on 2 nodes" "$tmp/cluster.out" || fail "expected 4 ranks on 2 nodes"

echo "smoke: train epoch 1 (3 steps), checkpoint"
# mwtrain-command
timeout 300 mpirun -n 4 --oversubscribe "$MWTRAIN" train --epochs 1 --steps-per-epoch 3 \
    --batch-per-replica 16 --threads 1 --progress none --collective-timeout 60 \
    --checkpoint-dir "$ckpt" --checkpoint-every-epochs 1 --summary-dir "$tmp/logs" \
    | tee "$tmp/train1.out"
grep -q "^Epoch 1," "$tmp/train1.out" || fail "no 'Epoch 1,' line"
[[ -f $ckpt/checkpoint && -f $ckpt/ckpt-1 ]] || fail "no checkpoint index or ckpt-1 in $ckpt"

echo "smoke: resume, train epoch 2"
# mwtrain-command
timeout 300 mpirun -n 4 --oversubscribe "$MWTRAIN" train --epochs 2 --steps-per-epoch 3 \
    --batch-per-replica 16 --threads 1 --progress none --collective-timeout 60 \
    --checkpoint-dir "$ckpt" --checkpoint-every-epochs 1 --summary-dir "$tmp/logs" --resume \
    | tee "$tmp/train2.out"
grep -q "^Epoch 2," "$tmp/train2.out" || fail "the resumed run printed no 'Epoch 2,' line"
if grep -q "^Epoch 1," "$tmp/train2.out"; then
    fail "the resumed run trained epoch 1 again"
fi
[[ -f $ckpt/ckpt-2 ]] || fail "the resumed run wrote no ckpt-2"

echo "smoke: eval the latest checkpoint"
unset TF_CONFIG
# mwtrain-command
timeout 120 "$MWTRAIN" eval --checkpoint-dir "$ckpt" | tee "$tmp/eval.out"
[[ -s $tmp/eval.out ]] || fail "eval printed nothing"
echo "smoke: 4 passed, 0 failed"
