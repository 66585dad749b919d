#!/usr/bin/env bash
# The model travels with the checkpoint and is compared: after training with
# --model A, `train --resume --model B` where B is A with one activation changed (the same
# parameter count) fails on every rank with one message naming the layer and both activations,
# exit 5, and leaves the checkpoint directory as it was; --model A again (the same text, or the same model with other layer names) resumes, and so
# does --resume without --model (the saved model); an evaluator task started with --model B
# refuses the chief's checkpoints of A.
#   test_resume_model.sh MWTRAIN
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
mw=$1
src=${MW_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
quick=(--steps-per-epoch 2 --test-examples 100 --progress none --summary-dir ""
       --collective-timeout 120 --checkpoint-dir "$tmp/ck")
# every file of the checkpoint directory: name, size, modification time, contents
# the checkpoints and their index; the job lock (.mwtrain.lock, rewritten by every job that
# takes the directory) is not checkpoint state
snapshot() { (cd "$tmp/ck" && find . -type f ! -name .mwtrain.lock -printf '%P %s %T@\n' | sort &&
              md5sum ./*); }

# A: the tutorial CNN; B: its Dense "dense" (layer 5) with activation linear instead of relu;
# A2: A with other layer names
a=$tmp/a.json b=$tmp/b.json a2=$tmp/a2.json
cp "$src/worker/models/tutorial_cnn.json" "$a"
sed '/"name": "dense",/,/"activation"/ s/"activation": "relu"/"activation": "linear"/' "$a" >"$b"
sed -e 's/"name": "dense",/"name": "hidden",/' -e 's/"name": "conv2d",/"name": "features",/' \
    "$a" >"$a2"
check '[[ $(diff "$a" "$b" | grep -c "^>") -eq 1 ]] && grep -q "\"linear\"" "$b"' \
    "B differs from A in one line"

timeout 300 mpiexec -n 2 "$mw" train --model "$a" --epochs 1 "${quick[@]}" >"$tmp/a.out" 2>&1
rc=$?
check '[[ $rc -eq 0 && -f $tmp/ck/ckpt-1 ]]' "train --model A writes ckpt-1: $(tail -n 2 "$tmp/a.out")"
before=$(snapshot)

want="--resume: --model $b differs from the model saved in ckpt-1: layer 5 (dense): activation relu"
want+=" in the checkpoint, linear in --model; resume without --model to use the saved model, or"
want+=" start a new --checkpoint-dir"
timeout 300 mpiexec -n 2 "$mw" train --resume --model "$b" --epochs 2 "${quick[@]}" \
    >"$tmp/b.out" 2>&1
rc=$?
check '[[ $rc -eq 5 ]]' "--resume --model B: exit 5 (got $rc): $(grep error "$tmp/b.out" | head -n 2)"
check '[[ $(grep -c "error:" "$tmp/b.out") -eq 1 ]] && grep -qF -- "error: $want" "$tmp/b.out"' \
    "--resume --model B: one message naming the layer and both activations: $(grep error "$tmp/b.out")"
check '! grep -q "^Epoch" "$tmp/b.out"' "--resume --model B: no training"
check '[[ "$(snapshot)" == "$before" ]]' "--resume --model B: the checkpoint directory is unchanged"

timeout 300 mpiexec -n 2 "$mw" train --resume --model "$a2" --epochs 2 "${quick[@]}" \
    >"$tmp/a2.out" 2>&1
rc=$?
check '[[ $rc -eq 0 ]] && grep -q "^Epoch 2, Loss" "$tmp/a2.out" && [[ -f $tmp/ck/ckpt-2 ]]' \
    "--resume --model A with other layer names trains on: $(tail -n 2 "$tmp/a2.out")"
timeout 300 mpiexec -n 2 "$mw" train --resume --model "$a" --epochs 3 "${quick[@]}" \
    >"$tmp/a-again.out" 2>&1
rc=$?
check '[[ $rc -eq 0 ]] && grep -q "^Epoch 3, Loss" "$tmp/a-again.out"' \
    "--resume --model A (the same text) trains on: $(tail -n 2 "$tmp/a-again.out")"
timeout 300 mpiexec -n 2 "$mw" train --resume --epochs 4 "${quick[@]}" >"$tmp/saved.out" 2>&1
rc=$?
check '[[ $rc -eq 0 ]] && grep -q "^Epoch 4, Loss" "$tmp/saved.out" &&
       grep -q "model: the one saved in .*ckpt-3" "$tmp/saved.out"' \
    "--resume without --model uses the saved model: $(tail -n 2 "$tmp/saved.out")"

# an evaluator task started with --model B: the chief's checkpoints of A are refused there
export TF_CONFIG='{"cluster":{"chief":["localhost:2222"],"evaluator":["localhost:2224"]},"task":{"type":"chief","index":0}}'
ev=(--epochs 1 --steps-per-epoch 2 --test-examples 100 --progress none --summary-dir ""
    --collective-timeout 60 --checkpoint-every-epochs 1 --checkpoint-dir "$tmp/ev")
timeout 120 mpiexec -n 1 "$mw" train --model "$a" "${ev[@]}" : -n 1 "$mw" train --model "$b" \
    "${ev[@]}" >"$tmp/ev.out" 2>&1
rc=$?
check '[[ $rc -ne 0 ]] && grep -qF "error: evaluator: --model $b differs from the model saved in ckpt-1: layer 5 (dense): activation relu in the checkpoint, linear in --model" "$tmp/ev.out"' \
    "an evaluator with --model B refuses ckpt-1 (exit $rc): $(grep error "$tmp/ev.out" | head -n 2)"
check '! grep -q "^Evaluator: ckpt-1" "$tmp/ev.out"' "the evaluator did not evaluate ckpt-1"

finish
