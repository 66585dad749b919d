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
# an operation (Keras writes no dtype for x * c) computes in its inputs' dtype, as JAX does: a
# bfloat16 tensor times a float32 scalar tensor is float32, so the mixed_bfloat16 Dense after
# it is refused, naming both and saying why (an operation has no policy to give it); times a
# bfloat16 scalar it stays bfloat16 and is read
python3 - "$tmp" <<'PY'
import json, sys
pol = lambda: {"module": "keras", "class_name": "DTypePolicy",
               "config": {"name": "mixed_bfloat16"}, "registered_name": None}
kt = lambda l, shape, dt: {"class_name": "__keras_tensor__",
                           "config": {"shape": shape, "dtype": dt, "keras_history": [l, 0, 0]}}
node = lambda *args: [{"args": list(args), "kwargs": {}}]
for cdt in ("float32", "bfloat16"):
    json.dump({"class_name": "Functional", "config": {"name": "op", "layers": [
        {"class_name": "InputLayer", "name": "in", "inbound_nodes": [],
         "config": {"batch_shape": [None, 28, 28, 1], "dtype": "float32", "name": "in"}},
        {"class_name": "Flatten", "name": "f", "config": {"name": "f", "dtype": pol()},
         "inbound_nodes": node(kt("in", [None, 28, 28, 1], "float32"))},
        {"class_name": "Dense", "name": "d1", "config": {"name": "d1", "units": 8, "dtype": pol()},
         "inbound_nodes": node(kt("f", [None, 784], "bfloat16"))},
        {"module": "keras.src.ops.numpy", "class_name": "Multiply", "name": "times",
         "config": {"name": "times"}, "inbound_nodes": node(
             kt("d1", [None, 8], "bfloat16"),
             {"class_name": "__tensor__", "config": {"value": 2.5, "dtype": cdt}})},
        {"class_name": "Dense", "name": "d2", "config": {"name": "d2", "units": 10, "dtype": pol()},
         "inbound_nodes": node(kt("times", [None, 8], cdt))}],
        "input_layers": [["in", 0, 0]], "output_layers": [["d2", 0, 0]]}},
        open(f"{sys.argv[1]}/op-{cdt}.json", "w"))
PY
"$mw" summary --model "$tmp/op-float32.json" >"$tmp/op32.out" 2>&1
rc=$?
check '[[ $rc -eq 2 ]] && grep -q "layer .d2. (dtype mixed_bfloat16) reads the output of the operation .times., which computes in float32: an operation takes its inputs. dtype, float32 when any of them is (a float32 constant, or a float32 layer.s output), as JAX promotes; give .times. only bfloat16 inputs" "$tmp/op32.out"' \
    "a bfloat16 tensor times a float32 scalar before a mixed_bfloat16 layer: exit $rc: $(tail -n 1 "$tmp/op32.out")"
"$mw" summary --model "$tmp/op-bfloat16.json" >"$tmp/op16.out" 2>&1
rc=$?
check '[[ $rc -eq 0 ]] && grep -q "^Trainable params: 6370" "$tmp/op16.out"' \
    "a bfloat16 tensor times a bfloat16 scalar stays bfloat16: exit $rc: $(tail -n 1 "$tmp/op16.out")"
timeout 60 "$mw" train "${quick[@]}" --dtype-policy mixed_float16 >"$tmp/f16.out" 2>&1
rc=$?
check '[[ $rc -eq 2 ]] && grep -q "mixed_float16 is not offered on the CPU" "$tmp/f16.out" && ! grep -q "^Epoch" "$tmp/f16.out"' \
    "mixed_float16 on the CPU: exit $rc: $(tail -n 1 "$tmp/f16.out")"
ONEDNN_MAX_CPU_ISA=AVX2 timeout 60 "$mw" train "${quick[@]}" --dtype-policy mixed_bfloat16 >"$tmp/b16.out" 2>&1
rc=$?
check '[[ $rc -eq 2 ]] && grep -q "no bfloat16 instructions" "$tmp/b16.out" && grep -q "capped by ONEDNN_MAX_CPU_ISA=AVX2" "$tmp/b16.out"' \
    "mixed_bfloat16 under ONEDNN_MAX_CPU_ISA=AVX2: exit $rc: $(tail -n 1 "$tmp/b16.out")"

# a mixed_float16 run resumed without --dtype-policy continues in mixed_float16 (the checkpoint's
# model records each layer's policy): bitwise the uninterrupted run's weights (the ref backend is
# deterministic); the control, resumed with --dtype-policy float32, differs. --model of the file's
# own float32 text, and a checkpoint written before the policy was recorded (its model text
# float32, its loss scale section there), are each one error naming the flag to pass.
f16=(--backend ref --seed 7 --threads 1 --no-shuffle --steps-per-epoch 3 --test-examples 50
     --progress none --summary-dir "")
mlp=$src/tests/data/keras/mlp_k3.json
"$mw" train "${f16[@]}" --model "$mlp" --epochs 2 --dtype-policy mixed_float16 \
    --checkpoint-dir "$tmp/f16full" --dump-weights "$tmp/f16full.bin" >"$tmp/f16full.out" 2>&1
"$mw" train "${f16[@]}" --model "$mlp" --epochs 1 --dtype-policy mixed_float16 \
    --checkpoint-dir "$tmp/f16ck" >"$tmp/f16a.out" 2>&1
cp -r "$tmp/f16ck" "$tmp/f16ck2" && cp -r "$tmp/f16ck" "$tmp/f16ck3"
"$mw" train "${f16[@]}" --epochs 2 --resume --checkpoint-dir "$tmp/f16ck" \
    --dump-weights "$tmp/f16res.bin" >"$tmp/f16res.out" 2>&1
rc=$?
check '[[ $rc -eq 0 ]] && grep -q "loss scale .* (mixed_float16)" "$tmp/f16res.out" &&
       cmp -s "$tmp/f16res.bin" "$tmp/f16full.bin"' \
    "mixed_float16 resumed without --dtype-policy = the uninterrupted run (exit $rc): $(tail -n 1 "$tmp/f16res.out")"
"$mw" train "${f16[@]}" --epochs 2 --resume --checkpoint-dir "$tmp/f16ck2" --dtype-policy float32 \
    --dump-weights "$tmp/f16to32.bin" >"$tmp/f16to32.out" 2>&1
check '! cmp -s "$tmp/f16to32.bin" "$tmp/f16full.bin"' \
    "the control: resumed with --dtype-policy float32, the weights differ"
"$mw" train "${f16[@]}" --epochs 2 --resume --checkpoint-dir "$tmp/f16ck3" --model "$mlp" \
    >"$tmp/f16m.out" 2>&1
rc=$?
check '[[ $rc -eq 5 ]] && grep -q "dtype policy mixed_float16 in the checkpoint, float32 in --model (pass --dtype-policy mixed_float16)" "$tmp/f16m.out"' \
    "resume of mixed_float16 with a float32 --model: exit $rc: $(grep error "$tmp/f16m.out")"
python3 - "$tmp/f16ck3/ckpt-1" <<'PY'
import struct, sys, zlib
path = sys.argv[1]
b = open(path, "rb").read()
out, pos, secs = bytearray(b[:16]), 16, []
for _ in range(struct.unpack_from("<I", b, 12)[0]):
    tag, csz = b[pos:pos + 8], struct.unpack_from("<Q", b, pos + 8)[0]
    secs.append([tag, zlib.decompress(b[pos + 28:pos + 28 + csz])])
    pos += 28 + csz
model = [s for s in secs if s[0].rstrip(b"\0") == b"model"][0]
model[1] = model[1].replace(b'{"module":"keras","class_name":"DTypePolicy","config":{"name":"mixed_float16"},"registered_name":null}', b'"float32"')
assert b"mixed_float16" not in model[1]
meta = [s for s in secs if s[0].rstrip(b"\0") == b"meta"][0]
meta[1] = meta[1][:96] + struct.pack("<Q", len(model[1]))
for tag, raw in secs:
    c = zlib.compress(raw, 1)
    out += tag + struct.pack("<QQI", len(c), len(raw), zlib.crc32(raw)) + c
open(path, "wb").write(out)
PY
"$mw" train "${f16[@]}" --epochs 2 --resume --checkpoint-dir "$tmp/f16ck3" >"$tmp/f16old.out" 2>&1
rc=$?
check '[[ $rc -eq 5 ]] && grep -q "the latest checkpoint was trained with mixed_float16 (it holds a loss scale); this run computes in float32: pass --dtype-policy mixed_float16" "$tmp/f16old.out"' \
    "an older mixed_float16 checkpoint resumed without --dtype-policy: exit $rc: $(grep error "$tmp/f16old.out")"

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
