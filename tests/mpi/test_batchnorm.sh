#!/usr/bin/env bash
# BatchNormalization under data parallelism (worker/model/model.h, replicas_cpu.c), on a Functional
# residual block with BN (tests/data/keras/graph/resblock_k3.json):
# - the CPU backend's --micro-batch does not change the result: a replica's batch statistics
#   come from its whole slice (weights and moving statistics bitwise equal for micro-batches
#   of 4, 16 and 64);
# - the moving statistics travel with the gradient all-reduce: 2 ranks x 1 replica and
#   1 rank x 2 replicas (the same slices) agree after one SGD step of lr 1 from the same
#   initial weights, gradients and moving statistics, within 1e-4 of the largest update
#   (cmp_weights A B 1e-4 W0; the tolerance is argued in test_layout.sh: float32 sums in
#   another order), while 1 rank x 1 replica, whose BN normalizes by all 64 rows instead of
#   two slices of 32, differs by more than 1e-2 (the control); 2 ranks twice (8 Adam steps)
#   are bitwise equal and the moving variance has moved away from its initial 1;
# - a checkpoint carries the moving statistics: 1 epoch, then --resume for a 2nd, is bitwise
#   the 2 epochs in one run; the same for synchronized BN (tests/data/keras/graph/syncbn_k3.json)
#   on 2 ranks, which also repeats bitwise.
#   test_batchnorm.sh MWTRAIN CMP_WEIGHTS [layout|other]
# PART layout is the first-step comparison alone (meson's 'batchnorm-layout', in suite 'isa'
# too), other the rest ('batchnorm'); neither: both.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
mw=$1 cmp=$2 part=${3:-all}
want() { [[ $part == all || $part == "$1" ]]; }
src=${MW_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
model=$src/tests/data/keras/graph/resblock_k3.json
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
common=(train --model "$model" --steps-per-epoch 8 --test-examples 200 --progress none --quiet
        --summary-dir "" --collective-timeout 120 --threads 1)
run() { # name ranks [flags...]
    local name=$1 n=$2
    shift 2
    timeout 300 mpiexec -n "$n" "$mw" "${common[@]}" --dump-weights "$tmp/$name.bin" "$@" \
        >"$tmp/$name.out" 2>&1
    local rc=$?
    check '[[ $rc -eq 0 ]]' "$name: exit $rc: $(tail -n 3 "$tmp/$name.out")"
}
if want layout; then
    step1=(--epochs 1 --checkpoint-every-epochs 0 --optimizer sgd --learning-rate 1
           --steps-per-epoch 1)
    run w0 1 --epochs 0 --checkpoint-every-epochs 0
    run s1-r2 2 "${step1[@]}" --batch-per-replica 32
    run s1-rep2 1 "${step1[@]}" --batch-per-replica 32 --replicas-per-worker 2
    run s1-1x64 1 "${step1[@]}" --batch-per-replica 64
    check '"$cmp" "$tmp/s1-r2.bin" "$tmp/s1-rep2.bin" 1e-4 "$tmp/w0.bin"' \
        "2 ranks and 1 rank x 2 replicas: the first step's gradients and moving statistics agree"
    check '! "$cmp" "$tmp/s1-r2.bin" "$tmp/s1-1x64.bin" 1e-2 "$tmp/w0.bin"' \
        "the control, one replica of 64 rows, differs by more than 1e-2"
fi
if ! want other; then
    echo "$pass passed, $fail failed"
    ((fail == 0))
    exit
fi

run mb4 1 --epochs 1 --checkpoint-every-epochs 0 --micro-batch 4
run mb16 1 --epochs 1 --checkpoint-every-epochs 0 --micro-batch 16
run mb64 1 --epochs 1 --checkpoint-every-epochs 0 --micro-batch 64
check '"$cmp" "$tmp/mb4.bin" "$tmp/mb16.bin" && "$cmp" "$tmp/mb4.bin" "$tmp/mb64.bin"' \
    "--micro-batch 4, 16, 64: the same weights and moving statistics, bitwise"

run r2 2 --epochs 1 --checkpoint-every-epochs 0 --batch-per-replica 32
run r2-again 2 --epochs 1 --checkpoint-every-epochs 0 --batch-per-replica 32
check '"$cmp" "$tmp/r2.bin" "$tmp/r2-again.bin"' "2 ranks twice: bitwise equal"
# the BN's moving variance left its initial 1 (the dump is packed, layer by layer: conv_a
# kernel 36, bias 4, conv_b 144 + 4, bn gamma 4, beta 4, moving mean 4, moving variance 4, ...)
check 'python3 - "$tmp/r2.bin" <<PY
import struct, sys
d = open(sys.argv[1], "rb").read()
f = struct.unpack("<%df" % (len(d) // 4), d)
o = 36 + 4 + 144 + 4 + 4 + 4 + 4
var = f[o:o + 4]
sys.exit(0 if len(f) == 254 and all(abs(v - 1.0) > 1e-4 and v > 0 for v in var) else 1)
PY' "the moving variance was updated by training"

run straight 1 --epochs 2 --checkpoint-every-epochs 0
run first 1 --epochs 1 --checkpoint-dir "$tmp/ck"
run resumed 1 --epochs 2 --resume --checkpoint-dir "$tmp/ck"
check '"$cmp" "$tmp/straight.bin" "$tmp/resumed.bin"' \
    "1 epoch + --resume: bitwise the 2 epochs in one run (moving statistics included)"

sync=(--model "$src/tests/data/keras/graph/syncbn_k3.json" --batch-per-replica 32)
run s-straight 2 "${sync[@]}" --epochs 2 --checkpoint-every-epochs 0
run s-again 2 "${sync[@]}" --epochs 2 --checkpoint-every-epochs 0
run s-first 2 "${sync[@]}" --epochs 1 --checkpoint-dir "$tmp/sck"
run s-resumed 2 "${sync[@]}" --epochs 2 --resume --checkpoint-dir "$tmp/sck"
check '"$cmp" "$tmp/s-straight.bin" "$tmp/s-again.bin"' "synchronized BN, 2 ranks twice: bitwise"
check '"$cmp" "$tmp/s-straight.bin" "$tmp/s-resumed.bin"' \
    "synchronized BN: 1 epoch + --resume is bitwise the 2 epochs in one run"
finish
