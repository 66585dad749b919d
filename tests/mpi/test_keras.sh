#!/usr/bin/env bash
# Keras models through the command line: every good config in tests/data/keras trains
# a few steps under mpiexec -n 2 with a finite loss; the Dropout CNN computes the same
# gradients on 1 rank and on 2 ranks x 1 and 1 rank x 2 replicas (the masks follow the global
# example id, and the regularization loss is scaled by 1/replicas); `summary --model` prints
# the table; a
# bad model and a model that does not fit the data fail on every rank before training with
# one message and exit 2; a checkpoint brings its model, so eval, export and train --resume
# need no --model (and another --model is one error).
#   test_keras.sh MWTRAIN CMP_WEIGHTS [layout|other]
# PART layout is the Dropout CNN's layouts alone (meson's 'keras-layout', in suite 'isa' too),
# other the rest ('keras'); neither: both.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
mw=$1 cmp=$2 part=${3:-all}
want() { [[ $part == all || $part == "$1" ]]; }
src=${MW_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
quick=(--epochs 1 --progress none --summary-dir "" --checkpoint-every-epochs 0
       --collective-timeout 120)

cnn=$src/tests/data/keras/cnn_dropout_k2.json
# layout independence with dropout and an L2 regularizer: global batch 32 in every layout, and
# every example at another batch position in each (one micro-batch of 32; 2 threads x 16 per
# rank; 2 replicas x 2 threads x 8), so masks keyed by position would differ. Compared: one
# SGD step of lr 1 from the same initial weights, as updates (cmp_weights A B 1e-4 W0), the
# gradients within 1e-4 of the largest (the tolerance is argued in tests/mpi/test_layout.sh:
# float32 sums in another order; many Adam steps would amplify that rounding near g = 0);
# the control, one example fewer (global batch 31), differs by more than 1e-2.
if want layout; then
    run() { # name ranks replicas-per-worker [flags...]
        local name=$1 n=$2 rpw=$3
        shift 3
        timeout 300 mpiexec -n "$n" "$mw" train --model "$cnn" "${quick[@]}" --optimizer sgd \
            --learning-rate 1 --steps-per-epoch 1 --batch-per-replica $((32 / (n * rpw))) \
            --replicas-per-worker "$rpw" "$@" --dump-weights "$tmp/$name.bin" >"$tmp/$name.log" 2>&1
    }
    run w0 1 1 --epochs 0 && run 1x1 1 1 --threads 1 --micro-batch 32 &&
        run 2x1 2 1 --threads 2 --micro-batch 8 && run 1x2rep 1 2 --threads 2 --micro-batch 4 &&
        run 1x1-31 1 1 --threads 1 --micro-batch 32 --batch-per-replica 31
    check '"$cmp" "$tmp/1x1.bin" "$tmp/2x1.bin" 1e-4 "$tmp/w0.bin"' "dropout CNN: 2 ranks = 1 rank"
    check '"$cmp" "$tmp/1x1.bin" "$tmp/1x2rep.bin" 1e-4 "$tmp/w0.bin"' \
        "dropout CNN: 2 replicas = 1 rank"
    check '! "$cmp" "$tmp/1x1.bin" "$tmp/1x1-31.bin" 1e-2 "$tmp/w0.bin"' \
        "dropout CNN: the control, one example fewer, differs by more than 1e-2"
fi
if ! want other; then
    echo "$pass passed, $fail failed"
    ((fail == 0))
    exit
fi

for cfg in "$src"/tests/data/keras/*.json; do
    name=$(basename "$cfg" .json)
    timeout 300 mpiexec -n 2 "$mw" train --model "$cfg" "${quick[@]}" --steps-per-epoch 5 \
        --batch-per-replica 16 >"$tmp/$name.out" 2>&1
    rc=$?
    check '[[ $rc -eq 0 ]] && grep -Eq "^Epoch 1, Loss: [0-9]+\.[0-9]+" "$tmp/$name.out"' \
        "$name trains under mpiexec -n 2 (exit $rc: $(tail -n 2 "$tmp/$name.out" | tr '\n' ' '))"
done

"$mw" summary --model "$cnn" >"$tmp/summary.out" 2>&1
rc=$?
check '[[ $rc -eq 0 ]] && grep -q "^dropout_2 (Dropout) *(None, 128) *0$" "$tmp/summary.out" &&
       grep -q "^Total params: 225034$" "$tmp/summary.out"' "summary --model"

bad=$src/tests/data/keras/bad/channels_first/input.json
timeout 60 mpiexec -n 2 "$mw" train --model "$bad" "${quick[@]}" >"$tmp/bad.out" 2>&1
rc=$?
check '[[ $rc -eq 2 ]] && grep -q "data_format \"channels_first\" is not supported" \
           "$tmp/bad.out" && ! grep -q "^Epoch" "$tmp/bad.out"' \
    "unsupported model: exit 2 before training (got $rc)"
wrong=$src/tests/data/keras/bad/input_mismatch/input.json
timeout 60 mpiexec -n 2 "$mw" train --model "$wrong" "${quick[@]}" >"$tmp/wrong.out" 2>&1
rc=$?
check '[[ $rc -eq 2 ]] && grep -q "(None, 150, 150, 3)" "$tmp/wrong.out"' \
    "input shape mismatch: exit 2 (got $rc)"

# dtype policies: a float32 layer between mixed_bfloat16 ones is one error naming both; the
# CPU refuses mixed_float16, and mixed_bfloat16 under ONEDNN_MAX_CPU_ISA=AVX2, with the reason
python3 - "$src/tests/data/keras/mlp_k3.json" "$tmp/mix.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for l in d["config"]["layers"][1:]:
    l["config"]["dtype"]["config"]["name"] = "float32" if l["config"]["name"] == "dense" else "mixed_bfloat16"
json.dump(d, open(sys.argv[2], "w"))
PY
"$mw" summary --model "$tmp/mix.json" >"$tmp/mix.out" 2>&1
rc=$?
check '[[ $rc -eq 2 ]] && grep -q "layer .dropout. (dtype mixed_bfloat16) reads the output of layer .dense. (dtype float32)" "$tmp/mix.out"' \
    "a float32 layer between mixed_bfloat16 ones: exit $rc: $(tail -n 1 "$tmp/mix.out")"
timeout 60 "$mw" train "${quick[@]}" --dtype-policy mixed_float16 >"$tmp/f16.out" 2>&1
rc=$?
check '[[ $rc -eq 2 ]] && grep -q "mixed_float16 is not offered on the CPU" "$tmp/f16.out" && ! grep -q "^Epoch" "$tmp/f16.out"' \
    "mixed_float16 on the CPU: exit $rc: $(tail -n 1 "$tmp/f16.out")"
ONEDNN_MAX_CPU_ISA=AVX2 timeout 60 "$mw" train "${quick[@]}" --dtype-policy mixed_bfloat16 >"$tmp/b16.out" 2>&1
rc=$?
check '[[ $rc -eq 2 ]] && grep -q "no bfloat16 instructions" "$tmp/b16.out" && grep -q "capped by ONEDNN_MAX_CPU_ISA=AVX2" "$tmp/b16.out"' \
    "mixed_bfloat16 under ONEDNN_MAX_CPU_ISA=AVX2: exit $rc: $(tail -n 1 "$tmp/b16.out")"

# a checkpoint brings its model: eval, export and train --resume need no --model
ck=(--checkpoint-dir "$tmp/kc" --steps-per-epoch 4 --test-examples 100 --progress none
    --summary-dir "")
timeout 300 mpiexec -n 2 "$mw" train --model "$cnn" --epochs 1 "${ck[@]}" >"$tmp/kc1.out" 2>&1
rc=$?
check '[[ $rc -eq 0 ]]' "Keras CNN with checkpoints: $(tail -n 2 "$tmp/kc1.out")"
trained=$(sed -n 's/^Epoch 1, .*\(Test Loss: [0-9.]*, Test Accuracy: [0-9.]*\),.*/\1/p' "$tmp/kc1.out")
timeout 120 "$mw" eval --checkpoint-dir "$tmp/kc" --test-examples 100 >"$tmp/kc-eval.out" 2>&1
rc=$?
check '[[ $rc -eq 0 ]] && grep -q "info: model: the one saved in $tmp/kc/ckpt-1" "$tmp/kc-eval.out" &&
       [[ -n "$trained" && "$(grep "^Test Loss" "$tmp/kc-eval.out")" == "$trained" ]]'     "eval restores the Keras model from the checkpoint ($trained): $(tail -n 2 "$tmp/kc-eval.out")"
timeout 120 "$mw" export --checkpoint-dir "$tmp/kc" --output "$tmp/kc.safetensors" >"$tmp/kc-export.out" 2>&1
rc=$?
check '[[ $rc -eq 0 ]] && grep -q "^Exported 225034 parameters" "$tmp/kc-export.out"'     "export restores the Keras model: $(tail -n 1 "$tmp/kc-export.out")"
timeout 300 mpiexec -n 2 "$mw" train --resume --epochs 2 "${ck[@]}" >"$tmp/kc2.out" 2>&1
rc=$?
check '[[ $rc -eq 0 ]] && grep -q "225034 parameters" "$tmp/kc2.out" && grep -q "^Epoch 2, Loss" "$tmp/kc2.out"' \
    "train --resume without --model continues the Keras model: $(tail -n 2 "$tmp/kc2.out")"
timeout 300 mpiexec -n 2 "$mw" train --resume --epochs 3 --model "$src/tests/data/keras/mlp_k3.json" \
    "${ck[@]}" >"$tmp/kc3.out" 2>&1
rc=$?
check '[[ $rc -eq 5 && $(grep -c "error: the latest checkpoint holds 225034 parameters" "$tmp/kc3.out") -eq 1 ]]' \
    "--model of another model: one error, exit 5 (got $rc): $(grep error "$tmp/kc3.out" | head -n 2)"

finish
