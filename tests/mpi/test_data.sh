#!/usr/bin/env bash
# The user's data through the command line (docs/data.md):
#   1. Fashion-MNIST converted to .npz with numpy (stored; uint8 images, int64 labels) trains
#      bitwise identically to the IDX files, on 1 rank and on 2 ranks;
#   2. a generated CIFAR-shaped set (32x32x3, 10 classes), written as .npz and as CIFAR-10
#      binary batches from the same arrays, gives bitwise equal weights with a 32x32x3 Keras
#      model that starts with RandomFlip + RandomCrop (2 epochs: the augmentation changes with
#      the epoch); 2 ranks and 1 rank x 2 replicas compute 1 rank's gradients in epoch 1's
#      first step and in epoch 2's (one SGD step of lr 1 from the initial weights, the other
#      after a step of lr 0), within the layout test's 1e-4 of the largest update
#      (cmp_weights A B 1e-4 W0; argued in tests/mpi/test_layout.sh); the controls, one example
#      fewer and epoch 1's step against epoch 2's, differ by more than 1e-2;
#   3. a 100-class set (CIFAR-100 binary, fine labels) and a 2-class set (.npy directory,
#      float32 images) train, `eval` reads the same data and `export` writes the model;
#   4. a model whose last layer does not match the classes, and one whose input does not match
#      the images, are refused on every rank before training (exit 2, one message naming both);
#   5. the evaluator task reports the chief's test accuracies on the same data and pipeline;
#      a checkpoint's input pipeline is compared with --model's on --resume (exit 5);
#   6. bad data end with exit 3 and a message naming the file.
#   test_data.sh MWTRAIN CMP_WEIGHTS [layout|other]
# PART layout is 2.'s layouts alone (meson's 'data-layout', in suite 'isa' too), other the rest
# ('data'); neither: both.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
mw=$1 cmp=$2 part=${3:-all}
want() { [[ $part == all || $part == "$1" ]]; }
src=${MW_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
py=/usr/bin/python3
if ! "$py" -c 'import numpy' 2>/dev/null; then
    echo "skip: $py has no numpy (Debian package python3-numpy, deploy/setup.sh)"
    exit 77
fi
fm=/usr/share/datasets/fashion-mnist
if [[ ! -e $fm/train-images-idx3-ubyte.gz && ! -e $fm/train-images-idx3-ubyte ]]; then
    echo "skip: no Fashion-MNIST in $fm (Debian package dataset-fashion-mnist)"
    exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
quick=(--epochs 1 --progress none --quiet --summary-dir "" --checkpoint-every-epochs 0
       --collective-timeout 120 --test-examples 200)
run() { # name ranks replicas-per-worker flags...
    local name=$1 n=$2 rpw=$3
    shift 3
    timeout 300 mpiexec -n "$n" "$mw" train "${quick[@]}" --batch-per-replica $((32 / (n * rpw))) \
        --replicas-per-worker "$rpw" --dump-weights "$tmp/$name.bin" "$@" >"$tmp/$name.out" 2>&1
    local rc=$?
    [[ $rc -eq 0 ]] || echo "$name: exit $rc: $(tail -n 3 "$tmp/$name.out")"
    return $rc
}

# --- 2. CIFAR-shaped: .npz and CIFAR-10 binary from the same arrays ---------------------------
"$py" - "$tmp" <<'EOF'
import os, sys
import numpy as np
t = sys.argv[1]
r = np.random.default_rng(14)
n_train, n_test = 640, 200
y = r.integers(0, 10, n_train + n_test).astype(np.uint8)
x = r.integers(0, 256, (n_train + n_test, 32, 32, 3)).astype(np.uint8)
x[np.arange(len(y)), :, :, y % 3] //= 2  # something to learn
np.savez(os.path.join(t, "cifar.npz"), x_train=x[:n_train], y_train=y[:n_train],
         x_test=x[n_train:], y_test=y[n_train:])
def records(xs, ys, fine=None):
    out = bytearray()
    for i, (im, lab) in enumerate(zip(xs, ys)):
        out += bytes([int(lab)] if fine is None else [int(lab), int(fine[i])])
        out += im.transpose(2, 0, 1).tobytes()  # channel-major, as CIFAR stores it
    return bytes(out)
os.makedirs(os.path.join(t, "cifar10"))
per = n_train // 5
for k in range(5):
    s = slice(k * per, (k + 1) * per)
    open(os.path.join(t, "cifar10", f"data_batch_{k + 1}.bin"), "wb").write(records(x[s], y[s]))
open(os.path.join(t, "cifar10", "test_batch.bin"), "wb").write(records(x[n_train:], y[n_train:]))
# 100 classes (CIFAR-100 binary: coarse = fine // 5) and 2 classes (.npy, float32 images)
fine = r.integers(0, 100, n_train + n_test).astype(np.uint8)
os.makedirs(os.path.join(t, "cifar100"))
open(os.path.join(t, "cifar100", "train.bin"), "wb").write(
    records(x[:n_train], fine[:n_train] // 5, fine[:n_train]))
open(os.path.join(t, "cifar100", "test.bin"), "wb").write(
    records(x[n_train:], fine[n_train:] // 5, fine[n_train:]))
os.makedirs(os.path.join(t, "two"))
xf = x.astype(np.float32) / 255
for k, v in dict(x_train=xf[:n_train], y_train=(y[:n_train] % 2).astype(np.int32),
                 x_test=xf[n_train:], y_test=(y[n_train:] % 2).astype(np.int32)).items():
    np.save(os.path.join(t, "two", k + ".npy"), v)
EOF
model=$src/tests/data/data/cifar_cnn_k3.json aug=$src/tests/data/data/cifar_aug_k3.json
two_epochs=(--epochs 2 --steps-per-epoch 8 --model "$aug")
if want other; then
    run c-npz-1x1 1 1 "${two_epochs[@]}" --data "$tmp/cifar.npz" &&
        run c-bin-1x1 1 1 "${two_epochs[@]}" --data "$tmp/cifar10" &&
        run c-npz-1x1-again 1 1 "${two_epochs[@]}" --data "$tmp/cifar.npz"
    check 'cmp -s "$tmp/c-npz-1x1.bin" "$tmp/c-bin-1x1.bin"' \
        "CIFAR-shaped: .npz = CIFAR binary, bitwise"
    check 'cmp -s "$tmp/c-npz-1x1.bin" "$tmp/c-npz-1x1-again.bin"' \
        "CIFAR-shaped: the same run twice, bitwise"
fi
cat >"$tmp/epoch2.json" <<'EOF'
{"class_name": "SGD", "config": {"learning_rate": {"class_name": "PiecewiseConstantDecay",
 "config": {"boundaries": [0], "values": [0.0, 1.0]}}}}
EOF
if want layout; then
    cifar=(--model "$aug" --data "$tmp/cifar.npz")
    s1=(--optimizer sgd --learning-rate 1 --steps-per-epoch 1)
    e2=(--optimizer-config "$tmp/epoch2.json" --epochs 2 --steps-per-epoch 1)
    run c-w0 1 1 "${cifar[@]}" --epochs 0 && run c-s1-1x1 1 1 "${cifar[@]}" "${s1[@]}" &&
        run c-s1-2x1 2 1 "${cifar[@]}" "${s1[@]}" && run c-s1-1x2rep 1 2 "${cifar[@]}" "${s1[@]}" &&
        run c-e2-1x1 1 1 "${cifar[@]}" "${e2[@]}" && run c-e2-2x1 2 1 "${cifar[@]}" "${e2[@]}" &&
        run c-e2-1x2rep 1 2 "${cifar[@]}" "${e2[@]}" &&
        run c-e2-1x1-31 1 1 "${cifar[@]}" "${e2[@]}" --batch-per-replica 31
    for l in 2x1 1x2rep; do
        for s in s1 e2; do
            check '"$cmp" "$tmp/c-$s-1x1.bin" "$tmp/c-$s-$l.bin" 1e-4 "$tmp/c-w0.bin"' \
                "CIFAR-shaped, $s: $l = 1 rank"
        done
    done
    check '! "$cmp" "$tmp/c-e2-1x1.bin" "$tmp/c-e2-1x1-31.bin" 1e-2 "$tmp/c-w0.bin"' \
        "CIFAR-shaped: the control, one example fewer, differs by more than 1e-2"
    check '! "$cmp" "$tmp/c-s1-1x1.bin" "$tmp/c-e2-1x1.bin" 1e-2 "$tmp/c-w0.bin"' \
        "CIFAR-shaped: the control, epoch 1's first step against epoch 2's, differs by > 1e-2"
fi
if ! want other; then
    echo "$pass passed, $fail failed"
    ((fail == 0))
    exit
fi

# --- 1. Fashion-MNIST: IDX and .npz -----------------------------------------------------------
"$py" - "$fm" "$tmp/fm.npz" <<'EOF'
import gzip, os, sys
import numpy as np
d, out = sys.argv[1:3]
def idx(name, off):
    p = os.path.join(d, name)
    raw = gzip.open(p + ".gz").read() if os.path.exists(p + ".gz") else open(p, "rb").read()
    return np.frombuffer(raw, np.uint8, offset=off)
np.savez(out, x_train=idx("train-images-idx3-ubyte", 16).reshape(-1, 28, 28),
         y_train=idx("train-labels-idx1-ubyte", 8).astype(np.int64),
         x_test=idx("t10k-images-idx3-ubyte", 16).reshape(-1, 28, 28),
         y_test=idx("t10k-labels-idx1-ubyte", 8).astype(np.int64))
EOF
for n in 1 2; do
    run "fm-idx-$n" "$n" 1 --steps-per-epoch 20 --data "$fm" &&
        run "fm-npz-$n" "$n" 1 --steps-per-epoch 20 --data "$tmp/fm.npz"
    check 'cmp -s "$tmp/fm-idx-$n.bin" "$tmp/fm-npz-$n.bin"' \
        "Fashion-MNIST .npz = IDX, bitwise, $n rank(s)"
done

# --- 3. 100 and 2 classes ---------------------------------------------------------------------
run c100 2 1 --steps-per-epoch 5 --data "$tmp/cifar100" --model "$src/tests/data/data/cifar_cnn_100_k3.json"
rc=$?
check '[[ $rc -eq 0 ]] && grep -q "^Epoch 1, Loss: " "$tmp/c100.out"' "CIFAR-100 (100 fine classes) trains"
run two 2 1 --steps-per-epoch 5 --data "$tmp/two" --checkpoint-dir "$tmp/ck-two" \
    --checkpoint-every-epochs 1
rc=$?
check '[[ $rc -eq 0 ]] && grep -q "^Epoch 1, Loss: " "$tmp/two.out"' \
    "a 2-class float32 .npy set trains with the built-in model"
timeout 120 mpiexec -n 2 "$mw" eval --data "$tmp/two" --checkpoint-dir "$tmp/ck-two" \
    --quiet >"$tmp/eval.out" 2>&1
rc=$?
check '[[ $rc -eq 0 ]] && grep -q "^Test Loss: " "$tmp/eval.out"' "eval on the 2-class set"
"$mw" export --checkpoint-dir "$tmp/ck-two" --output "$tmp/two.safetensors" --quiet >"$tmp/export.out" 2>&1
rc=$?
check '[[ $rc -eq 0 && -s $tmp/two.safetensors ]]' "export of the 2-class model (the built-in CNN for 32x32x3)"

# --- 4. models that do not fit the data -------------------------------------------------------
timeout 120 mpiexec -n 2 "$mw" train "${quick[@]}" --data "$tmp/cifar100" --model "$model" \
    >"$tmp/classes.out" 2>&1
rc=$?
check '[[ $rc -eq 2 ]] && grep -q "has 10 units" "$tmp/classes.out" &&
       grep -q "100 classes" "$tmp/classes.out" && ! grep -q "^Epoch" "$tmp/classes.out" &&
       [[ $(grep -c "error:" "$tmp/classes.out") -eq 1 ]]' \
    "last layer 10 units vs 100 classes: exit 2 before training, one message (got $rc)"
timeout 120 mpiexec -n 2 "$mw" train "${quick[@]}" --data "$fm" --model "$model" \
    >"$tmp/shape.out" 2>&1
rc=$?
check '[[ $rc -eq 2 ]] && grep -q "(None, 32, 32, 3)" "$tmp/shape.out" &&
       grep -q "28x28x1 images" "$tmp/shape.out" && grep -q "cifar_cnn_k3.json" "$tmp/shape.out"' \
    "model input 32x32x3 vs data 28x28x1: exit 2 naming both (got $rc)"

# the evaluator task evaluates the same data through the same pipeline as the chief
ev='{"cluster":{"chief":["localhost:2222"],"worker":["localhost:2223"],"evaluator":["localhost:2224"]},"task":{"type":"chief","index":0}}'
TF_CONFIG=$ev timeout 300 mpiexec -n 3 "$mw" train "${quick[@]}" --epochs 2 --steps-per-epoch 4 \
    --data "$tmp/cifar.npz" --model "$aug" --batch-per-replica 16 --checkpoint-every-epochs 1 \
    --checkpoint-dir "$tmp/ck-ev" >"$tmp/ev.out" 2>&1
rc=$?
chief=$(sed -n 's/^Epoch.*Test Accuracy: \([0-9.]*\),.*/\1/p' "$tmp/ev.out" | tr '\n' ' ')
evaluator=$(sed -n 's/^Evaluator:.*Test Accuracy: \([0-9.]*\)$/\1/p' "$tmp/ev.out" | tr '\n' ' ')
check '[[ $rc -eq 0 && -n $chief && $chief == "$evaluator" ]]' \
    "evaluator task on CIFAR-shaped .npz with a pipeline: $evaluator = chief's $chief (exit $rc)"

# a checkpoint's input pipeline is part of its model: --resume with another one is refused
run aug-ck 1 1 --steps-per-epoch 2 --data "$tmp/cifar.npz" --model "$aug" \
    --checkpoint-dir "$tmp/ck-aug" --checkpoint-every-epochs 1
sed 's/"mode": "horizontal"/"mode": "vertical"/' "$aug" >"$tmp/aug-vertical.json"
timeout 120 mpiexec -n 2 "$mw" train "${quick[@]}" --data "$tmp/cifar.npz" --resume --epochs 2 \
    --model "$tmp/aug-vertical.json" --checkpoint-dir "$tmp/ck-aug" >"$tmp/resume.out" 2>&1
rc=$?
check '[[ $rc -eq 5 ]] && grep -q "input pipeline layer 0 (random_flip): RandomFlip(horizontal) in the checkpoint, RandomFlip(vertical) in --model" "$tmp/resume.out"' \
    "--resume with another input pipeline: exit 5 naming the layer (got $rc)"

# --- 6. bad data: exit 3 on every rank, one message -------------------------------------------
head -c 1000 "$tmp/cifar10/data_batch_3.bin" >"$tmp/cut.bin" && mv "$tmp/cut.bin" "$tmp/cifar10/data_batch_3.bin"
timeout 120 mpiexec -n 2 "$mw" train "${quick[@]}" --data "$tmp/cifar10" >"$tmp/bad.out" 2>&1
rc=$?
check '[[ $rc -eq 3 ]] && grep -q "data_batch_3.bin: file size 1000" "$tmp/bad.out"' \
    "a cut CIFAR batch: exit 3 naming the file (got $rc)"
timeout 120 mpiexec -n 2 "$mw" train "${quick[@]}" --data "$tmp/two" --classes 1 \
    >"$tmp/cls.out" 2>&1
rc=$?
check '[[ $rc -eq 3 ]] && grep -q "y_train.npy: example [0-9]* has label 1, expected 0..0 (--classes 1)" \
    "$tmp/cls.out"' "--classes below the labels: exit 3 (got $rc)"

finish
