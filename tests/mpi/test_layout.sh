#!/usr/bin/env bash
# Layout independence (DESIGN.md): 20 training steps with 1x1, 2x1, 4x1,
# 2 nodes x 2 (fake hosts in TF_CONFIG) and 1 rank x 4 replicas give the same
# weights (max relative difference <= 1e-4) and the same losses; the same
# layout twice is bitwise equal.
# The same for a model with synchronized BatchNormalization (tests/data/keras/graph/syncbn_k3.json,
# three BN layers with synchronized: true, one over a flat (batch, 32) tensor): every layout
# normalizes by the statistics of the whole global batch. The control: the same model with
# synchronized false differs between 1x1 and 4x1 by more than 1e-3 (each replica uses its own 16
# rows), so the comparison can tell the two apart; with one replica both are the same (1e-6).
#   test_layout.sh MWTRAIN CMP_WEIGHTS
set -euo pipefail
mw=$1 cmp=$2
tmp=$(mktemp -d)
trap "rm -rf $tmp" EXIT; [[ -n ${KEEP:-} ]] && trap - EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
# global batch 64 in every layout: 16 per replica x 4 replicas
src=${MW_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
common=(train --epochs 1 --steps-per-epoch 20 --progress none --quiet --collective-timeout 120
        --checkpoint-every-epochs 0 --summary-dir "")
sync=(--model "$src/tests/data/keras/graph/syncbn_k3.json" --test-examples 256)
sed 's/"synchronized": true/"synchronized": false/' "$src/tests/data/keras/graph/syncbn_k3.json" \
    >"$tmp/unsync.json"
unsync=(--model "$tmp/unsync.json" --test-examples 256)
run() { # name ranks replicas-per-worker [env...]
    local name=$1 n=$2 rpw=$3
    shift 3
    env "$@" timeout 300 mpiexec -n "$n" "$mw" "${common[@]}" --batch-per-replica $((64 / (n * rpw))) \
        --replicas-per-worker "$rpw" --dump-weights "$tmp/$name.bin" >"$tmp/$name.out"
    sed -n 's/^Epoch 1, Loss: \([0-9.]*\),.*Test Loss: \([0-9.]*\),.*/\1 \2/p' "$tmp/$name.out" >"$tmp/$name.loss"
    echo "$name: $(cat "$tmp/$name.loss")"
}
fake2x2='{"cluster":{"worker":["node-a:2222","node-a:2223","node-b:2222","node-b:2223"]},"task":{"type":"worker","index":0}}'
run 1x1 1 1
run 1x1-again 1 1
run 2x1 2 1
run 4x1 4 1
run 2nodes-x2 4 1 TF_CONFIG="$fake2x2"
run 2nodes-x2-again 4 1 TF_CONFIG="$fake2x2"
run 1x4rep 1 4
# run NAME RANKS RPW [ENV...] -- [FLAGS...]: the model flags after --
runm() {
    local name=$1 n=$2 rpw=$3
    shift 3
    local envs=()
    while [[ $1 != -- ]]; do envs+=("$1"); shift; done
    shift
    env "${envs[@]}" timeout 300 mpiexec -n "$n" "$mw" "${common[@]}" "$@" \
        --batch-per-replica $((64 / (n * rpw))) --replicas-per-worker "$rpw" \
        --dump-weights "$tmp/$name.bin" >"$tmp/$name.out"
    sed -n 's/^Epoch 1, Loss: \([0-9.]*\),.*Test Loss: \([0-9.]*\),.*/\1 \2/p' "$tmp/$name.out" >"$tmp/$name.loss"
    echo "$name: $(cat "$tmp/$name.loss")"
}
runm s1x1 1 1 -- "${sync[@]}"
runm s2x1 2 1 -- "${sync[@]}"
runm s4x1 4 1 -- "${sync[@]}"
runm s2nodes-x2 4 1 TF_CONFIG="$fake2x2" -- "${sync[@]}"
runm s2nodes-x2-again 4 1 TF_CONFIG="$fake2x2" -- "${sync[@]}"
runm s1x4rep 1 4 -- "${sync[@]}"
runm u1x1 1 1 -- "${unsync[@]}"
runm u4x1 4 1 -- "${unsync[@]}"
pass=0 fail=0
check() { if "$@"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $*"; fi; }
check "$cmp" "$tmp/1x1.bin" "$tmp/1x1-again.bin"
check "$cmp" "$tmp/2nodes-x2.bin" "$tmp/2nodes-x2-again.bin"
for l in 2x1 4x1 2nodes-x2 1x4rep; do
    check "$cmp" "$tmp/1x1.bin" "$tmp/$l.bin" 1e-4
    check awk -v a="$(cat "$tmp/1x1.loss")" -v b="$(cat "$tmp/$l.loss")" \
        'BEGIN { split(a, x); split(b, y); d1 = x[1] - y[1]; d2 = x[2] - y[2];
                 exit !(x[1] > 0 && d1 * d1 < 1e-8 && d2 * d2 < 1e-8) }'
done
check "$cmp" "$tmp/s2nodes-x2.bin" "$tmp/s2nodes-x2-again.bin"
for l in 2x1 4x1 2nodes-x2 1x4rep; do
    check "$cmp" "$tmp/s1x1.bin" "$tmp/s$l.bin" 1e-4
    check awk -v a="$(cat "$tmp/s1x1.loss")" -v b="$(cat "$tmp/s$l.loss")" \
        'BEGIN { split(a, x); split(b, y); d1 = x[1] - y[1]; d2 = x[2] - y[2];
                 exit !(x[1] > 0 && d1 * d1 < 1e-8 && d2 * d2 < 1e-8) }'
done
check "$cmp" "$tmp/s1x1.bin" "$tmp/u1x1.bin" 1e-6
if "$cmp" "$tmp/u1x1.bin" "$tmp/u4x1.bin" 1e-3 >/dev/null; then
    check false "synchronized false: 1x1 and 4x1 should differ by more than 1e-3"
else
    pass=$((pass + 1))
fi
echo "$pass passed, $fail failed"
((fail == 0))
