#!/usr/bin/env bash
# Layout independence (docs/design.md): 1x1, 2x1, 4x1, 2 nodes x 2 (fake hosts in TF_CONFIG) and
# 1 rank x 4 replicas, global batch 64 in each, compute the same gradients and report the same
# losses; the same layout twice trains bitwise the same weights. For the tutorial CNN and for a
# model with synchronized BatchNormalization (tests/data/keras/graph/syncbn_k3.json, three BN
# layers with synchronized: true, one over a flat (batch, 32) tensor: every layout normalizes
# by the statistics of the whole global batch).
#
# What a layout may change is the order of float32 sums: each thread's and replica's partial
# sums of the weight gradients, then the all-reduce. Which examples a step sees, how the loss
# is scaled and the optimizer's element-wise rule are the same in every layout. So gradients
# are compared, each taken at the same weights:
#   - step 1's: one SGD step of lr 1 from the initial weights (the --epochs 0 dump w0);
#   - step 14's (the global batch at offset 13 x 64 of the epoch's order): 13 SGD steps of
#     lr 0 (a PiecewiseConstantDecay), which leave w0 bitwise, then one of lr 1;
# as updates: `cmp_weights A B 1e-4 w0` is max|a - b| / max|a - w0|.
#
# Tolerance 1e-4 of the largest update. The longest sums are conv1's bias and kernel
# gradients: n = 64 images x 26 x 26 positions = 43264 terms each. Two orders of an n-term
# float32 sum differ by at most 2 n u sum|t| (u = 2^-24: 5e-3 sum|t|) and, when the rounding
# errors have random signs as they do here, by about 2 sqrt(n) u sum|t| = 2.5e-5 sum|t|
# (Higham and Mary, SIAM J. Sci. Comput. 41, 2019). 1e-4 of the largest gradient leaves room for
# a sum of magnitudes 4 times the sum. Storing w0 - g rounds by u max|w| / max|g|, about 3e-7
# here. Measured: at most 1.8e-6, with oneDNN's AVX-512 and its AVX2 kernels.
# Controls, each must differ by more than 1e-2 (100 times the tolerance), so that a lost,
# doubled or misplaced example cannot pass: the global batch with one example fewer (63);
# step 14's update against step 1's (a batch taken one offset off); and synchronized: false,
# 1x1 against 4x1 (each replica normalizes by its own 16 rows; with one replica the two
# models agree within the tolerance, so that is all the control changes).
#
# Not compared across layouts: many Adam steps. Adam's first steps move a weight by about lr
# whatever the size of its gradient, so a gradient near 0, whose sign the summation order
# decides, moves a weight by +lr in one layout and -lr in another: after 20 steps the tutorial
# CNN's layouts differ by 5e-3 of the weights with oneDNN's AVX-512 kernels and by 1e-5 with
# its AVX2 ones. That is rounding amplified, not a layout bug; the same layout repeats bitwise.
#   test_layout.sh MWTRAIN CMP_WEIGHTS
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
mw=$1 cmp=$2
tmp=$(mktemp -d)
trap "rm -rf $tmp" EXIT; [[ -n ${KEEP:-} ]] && trap - EXIT
src=${MW_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
tol=1e-4 control=1e-2
common=(train --epochs 1 --progress none --quiet --collective-timeout 120
        --checkpoint-every-epochs 0 --summary-dir "" --test-examples 256)
step1=(--optimizer sgd --learning-rate 1 --steps-per-epoch 1)
cat >"$tmp/step14.json" <<'EOF'
{"class_name": "SGD", "config": {"learning_rate": {"class_name": "PiecewiseConstantDecay",
 "config": {"boundaries": [12], "values": [0.0, 1.0]}}}}
EOF
step14=(--optimizer-config "$tmp/step14.json" --steps-per-epoch 14)
adam20=(--steps-per-epoch 20)
sync=(--model "$src/tests/data/keras/graph/syncbn_k3.json")
sed 's/"synchronized": true/"synchronized": false/' "$src/tests/data/keras/graph/syncbn_k3.json" \
    >"$tmp/unsync.json"
unsync=(--model "$tmp/unsync.json")
fake2x2='{"cluster":{"worker":["node-a:2222","node-a:2223","node-b:2222","node-b:2223"]},"task":{"type":"worker","index":0}}'
# run NAME RANKS REPLICAS-PER-WORKER [ENV...] -- [FLAGS...]: global batch 64 unless FLAGS say
run() {
    local name=$1 n=$2 rpw=$3
    shift 3
    local envs=()
    while [[ $1 != -- ]]; do envs+=("$1"); shift; done
    shift
    env "${envs[@]}" timeout 300 mpiexec -n "$n" "$mw" "${common[@]}" \
        --batch-per-replica $((64 / (n * rpw))) --replicas-per-worker "$rpw" "$@" \
        --dump-weights "$tmp/$name.bin" >"$tmp/$name.out"
    sed -n 's/^Epoch 1, Loss: \([0-9.]*\),.*Test Loss: \([0-9.]*\),.*/\1 \2/p' "$tmp/$name.out" \
        >"$tmp/$name.loss"
    echo "$name: $(cat "$tmp/$name.loss")"
}
# every layout: NAME-PREFIX [FLAGS...]
layouts() {
    local p=$1
    shift
    run "$p-1x1" 1 1 -- "$@"
    run "$p-2x1" 2 1 -- "$@"
    run "$p-4x1" 4 1 -- "$@"
    run "$p-2nodes-x2" 4 1 TF_CONFIG="$fake2x2" -- "$@"
    run "$p-1x4rep" 1 4 -- "$@"
}
run w0 1 1 -- --epochs 0
run sw0 1 1 -- "${sync[@]}" --epochs 0
layouts s1 "${step1[@]}"
layouts s14 "${step14[@]}"
layouts sync-s1 "${sync[@]}" "${step1[@]}"
run s1-63 1 1 -- "${step1[@]}" --batch-per-replica 63
run unsync-s1-1x1 1 1 -- "${unsync[@]}" "${step1[@]}"
run unsync-s1-4x1 4 1 -- "${unsync[@]}" "${step1[@]}"
run adam-1x1 1 1 -- "${adam20[@]}"
run adam-1x1-again 1 1 -- "${adam20[@]}"
run adam-2nodes-x2 4 1 TF_CONFIG="$fake2x2" -- "${adam20[@]}"
run adam-2nodes-x2-again 4 1 TF_CONFIG="$fake2x2" -- "${adam20[@]}"
run sync-adam-2nodes-x2 4 1 TF_CONFIG="$fake2x2" -- "${sync[@]}" "${adam20[@]}"
run sync-adam-2nodes-x2-again 4 1 TF_CONFIG="$fake2x2" -- "${sync[@]}" "${adam20[@]}"

# differs A B BASE: the control, more than $control apart
differs() {
    if "$cmp" "$1" "$2" "$control" "$3"; then
        fail=$((fail + 1))
        echo "FAIL: $1 and $2 should differ by more than $control (a control)"
    else
        pass=$((pass + 1))
    fi
}
# the losses as printed (4 decimals): equal up to one unit of the last digit, since values
# 1e-7 apart can round to either side of a printed digit
same_losses() {
    check_cmd awk -v a="$(cat "$tmp/$1.loss")" -v b="$(cat "$tmp/$2.loss")" \
        'BEGIN { split(a, x); split(b, y); d1 = x[1] - y[1]; d2 = x[2] - y[2];
                 exit !(x[1] > 0 && d1 * d1 <= 1.0201e-8 && d2 * d2 <= 1.0201e-8) }'
}
for l in 2x1 4x1 2nodes-x2 1x4rep; do
    check_cmd "$cmp" "$tmp/s1-1x1.bin" "$tmp/s1-$l.bin" "$tol" "$tmp/w0.bin"
    same_losses s1-1x1 "s1-$l"
    check_cmd "$cmp" "$tmp/s14-1x1.bin" "$tmp/s14-$l.bin" "$tol" "$tmp/w0.bin"
    same_losses s14-1x1 "s14-$l"
    check_cmd "$cmp" "$tmp/sync-s1-1x1.bin" "$tmp/sync-s1-$l.bin" "$tol" "$tmp/sw0.bin"
    same_losses sync-s1-1x1 "sync-s1-$l"
done
differs "$tmp/s1-1x1.bin" "$tmp/s1-63.bin" "$tmp/w0.bin"
differs "$tmp/s1-1x1.bin" "$tmp/s14-1x1.bin" "$tmp/w0.bin"
check_cmd "$cmp" "$tmp/sync-s1-1x1.bin" "$tmp/unsync-s1-1x1.bin" "$tol" "$tmp/sw0.bin"
differs "$tmp/unsync-s1-1x1.bin" "$tmp/unsync-s1-4x1.bin" "$tmp/sw0.bin"
check_cmd "$cmp" "$tmp/adam-1x1.bin" "$tmp/adam-1x1-again.bin"
check_cmd "$cmp" "$tmp/adam-2nodes-x2.bin" "$tmp/adam-2nodes-x2-again.bin"
check_cmd "$cmp" "$tmp/sync-adam-2nodes-x2.bin" "$tmp/sync-adam-2nodes-x2-again.bin"
finish
