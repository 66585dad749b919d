#!/usr/bin/env bash
# Divergence stops the run (Keras' TerminateOnNaN), under mpiexec -n 2. From a good run's two
# checkpoints, each of five optimizer configs that validation accepts and that blow up within
# an epoch (tests/data/diverge: Adam epsilon 0, CosineDecayRestarts t_mul 1e-300, learning
# rate 1e308, AdamW weight_decay 1e10, ExponentialDecay decay_rate 1e30) resumes and must end
# with exit 8 and one message saying what was not finite and that nothing was saved, every
# rank gone, the checkpoint directory byte for byte as it was (no NaN checkpoint pushes a good
# one out of --keep-checkpoints), and a --resume with the good settings continuing from the
# last good checkpoint to the end. Also the finite-loss case: Adam at lr 1e308 for one step
# prints a finite training loss and leaves every weight non-finite: exit 8, nothing saved.
#   test_diverge.sh MWTRAIN DATADIR
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
mw=$1 data=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
flags=(train --model "$data/keras/mlp_k3.json" --steps-per-epoch 40 --batch-per-replica 16
       --threads 1 --progress none --test-examples 200 --checkpoint-every-epochs 1
       --keep-checkpoints 2 --summary-dir "" --collective-timeout 60)
sums() { (cd "$1" && sha1sum ckpt-* checkpoint 2>/dev/null); }

for opt in adam adamw; do
    mpiexec -n 2 "$mw" "${flags[@]}" --epochs 2 --optimizer "$opt" --checkpoint-dir "$tmp/good-$opt" \
        >"$tmp/good-$opt.out" 2>&1
    rc=$?
    check '[[ $rc -eq 0 && -f $tmp/good-$opt/ckpt-2 ]]' "the good $opt run (exit $rc): $(tail -n 2 "$tmp/good-$opt.out")"
done

for cfg in "$data"/diverge/*.json; do
    name=$(basename "$cfg" .json)
    opt=adam
    [[ $name == adamw* ]] && opt=adamw
    cp -r "$tmp/good-$opt" "$tmp/$name"
    before=$(sums "$tmp/$name")
    mpiexec -n 2 "$mw" "${flags[@]}" --epochs 4 --resume --optimizer-config "$cfg" \
        --checkpoint-dir "$tmp/$name" >"$tmp/$name.out" 2>&1
    rc=$?
    left=$(pgrep -f -- "--checkpoint-dir $tmp/$name( |$)" | wc -l)
    msg=$(grep -m 1 "diverged" "$tmp/$name.out")
    echo "$name: exit $rc: $msg"
    check '[[ $rc -eq 8 && $left -eq 0 ]]' "$name: exit 8 and every rank gone (exit $rc, $left left): $(tail -n 3 "$tmp/$name.out")"
    check 'grep -qE "error: the run diverged: (the training loss on some rank by step [0-9]+|the (test|training) loss of epoch [0-9]+ \(step [0-9]+\)|after step [0-9]+ the (weights|optimizer slot [123]) of layer .[a-z_0-9]+. hold [0-9]+ non-finite value\(s\)) .*(nothing was saved from it|the checkpoint is not written), the earlier checkpoints stay" "$tmp/$name.out"' \
        "$name: the message says what was not finite and that nothing was saved: $msg"
    check '[[ "$(sums "$tmp/$name")" == "$before" ]]' "$name: the checkpoints are as they were: $(ls "$tmp/$name" | tr '\n' ' ')"
done

# the last good checkpoint goes on with good settings
mpiexec -n 2 "$mw" "${flags[@]}" --epochs 3 --resume --checkpoint-dir "$tmp/learning_rate_1e308" \
    >"$tmp/again.out" 2>&1
rc=$?
check '[[ $rc -eq 0 ]] && grep -q "restoring .*ckpt-2 (epoch 2" "$tmp/again.out" && grep -q "^Epoch 3, Loss: [0-9]" "$tmp/again.out"' \
    "--resume after a divergence continues from the last good checkpoint (exit $rc): $(grep -E "restoring|^Epoch" "$tmp/again.out" | tr '\n' ' ')"

# a finite loss and non-finite weights: one step at lr 1e308
mpiexec -n 2 "$mw" "${flags[@]}" --epochs 1 --steps-per-epoch 1 \
    --optimizer-config "$data/diverge/learning_rate_1e308.json" --checkpoint-dir "$tmp/one" \
    >"$tmp/one.out" 2>&1
rc=$?
check '[[ $rc -eq 8 ]] && ! ls "$tmp/one" | grep -q ckpt- && grep -q "error: the run diverged: the test loss of epoch 1 (step 1) was not finite" "$tmp/one.out"' \
    "one step at lr 1e308: exit 8, no checkpoint (exit $rc; $(ls "$tmp/one" | tr '\n' ' ')): $(grep -m 1 error "$tmp/one.out")"
finish
