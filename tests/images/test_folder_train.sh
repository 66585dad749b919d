#!/usr/bin/env bash
# The tutorial CNN trained from Fashion-MNIST written out as a PNG image folder and as 8 TFRecord
# shards of tf.train.Example (tests/images/folder_data.py, TensorFlow's encoder and writer)
# against the same images as a .npz in the folder's order: the same final weights, bit for bit,
# on 1 rank and under mpirun -n 2 (the examples are decoded where each rank's replicas need
# them, the order is the same global permutation), also with a decoding pool decoding each next
# step ahead (--decode-threads 2). The control: a run with another seed differs.
# Also --validation-split against Keras' (check_split.py) and its errors.
#   test_folder_train.sh MWTRAIN BUILD_DIR DATA_LOAD
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
mw=${1:?usage: test_folder_train.sh MWTRAIN BUILD_DIR DATA_LOAD}
dl=${3:?usage: test_folder_train.sh MWTRAIN BUILD_DIR DATA_LOAD}
src=${MW_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
if [[ ! -r /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]]; then
    echo "SKIP: no Fashion-MNIST in /usr/share/datasets/fashion-mnist (deploy/setup.sh)"
    exit 77
fi
if ! py=$(bash "$src/tests/bench/tf_venv.sh" "$2" 2>/dev/null); then
    echo "SKIP: the TensorFlow environment could not be made (tests/bench/tf_venv.sh)"
    exit 77
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/mwtest-folder-XXXXXX")
trap 'rm -rf "$work"' EXIT
"$py" "$src/tests/images/folder_data.py" "$work" 640 200 >"$work/gen.log" 2>&1 ||
    { cat "$work/gen.log"; exit 1; }
train() { # NAME RANKS DATA [ARG...]
    local name=$1 n=$2 data=$3
    shift 3
    mpirun -n "$n" "$mw" train --data "$data" --color-mode grayscale --epochs 2 \
        --batch-per-replica "${bpr:-$((32 / n))}" --progress none --checkpoint-dir "$work/ck-$name" \
        --dump-weights "$work/w-$name.bin" "$@" >"$work/$name.log" 2>&1 ||
        { echo "FAIL: $name: exit $?"; tail -5 "$work/$name.log"; }
}
for n in 1 2; do
    train "npz$n" $n "$work/data.npz"
    train "folder$n" $n "$work/folder"
    train "shards$n" $n "$work/shards"
    check "cmp -s $work/w-npz$n.bin $work/w-folder$n.bin" "PNG folder != .npz on $n rank(s)"
    check "cmp -s $work/w-npz$n.bin $work/w-shards$n.bin" "TFRecord shards != .npz on $n rank(s)"
    train "pool$n" $n "$work/shards" --decode-threads 2 # the decoding pool: the same bits
    check "cmp -s $work/w-npz$n.bin $work/w-pool$n.bin" "shards with --decode-threads 2 != .npz on $n rank(s)"
done
# --skip-bad-examples: a truncated PNG (the 21st image of class 3), a text file named .jpg and
# a record whose data CRC fails (the 2nd of shard 3; each shard holds 80 records) are dropped
# before training, so the model is the .npz's without those examples, bit for bit; without the
# switch the job ends with exit 3 naming the file (2 ranks: the whole job)
cp -r "$work/folder" "$work/badf"
cp -r "$work/shards" "$work/bads"
bad=$(ls "$work/badf/train/c3" | sed -n 21p)
head -c 100 "$work/folder/train/c3/$bad" >"$work/badf/train/c3/$bad"
echo "not an image" >"$work/badf/train/c5/zz.jpg"
shard=$(ls "$work/bads"/fmnist-train.tfrecord-00003-of-00008)
"$py" - "$work" "$shard" <<'PY' >"$work/drop.log" 2>&1 || { cat "$work/drop.log"; exit 1; }
import struct, sys
import numpy as np
work, shard = sys.argv[1:3]
d = dict(np.load(work + "/data.npz"))
raw = bytearray(open(shard, "rb").read())
n = struct.unpack("<Q", raw[:8])[0]
second = 12 + n + 4  # the second record's header
raw[second + 12 + 5] ^= 0xFF  # a byte of its data: the data CRC fails, the framing holds
open(shard, "wb").write(raw)
c3 = np.flatnonzero(d["y_train"] == 3)[20]
for name, drop in (("npzf", [c3]), ("npzs", [3 * 80 + 1])):
    keep = np.setdiff1d(np.arange(len(d["y_train"])), drop)
    np.savez(work + "/" + name + ".npz", x_train=d["x_train"][keep], y_train=d["y_train"][keep],
             x_test=d["x_test"], y_test=d["y_test"])
PY
for n in 1 2; do
    train "npzf$n" $n "$work/npzf.npz"
    train "npzs$n" $n "$work/npzs.npz"
    train "skipf$n" $n "$work/badf" --skip-bad-examples
    train "skips$n" $n "$work/bads" --skip-bad-examples
    check "cmp -s $work/w-npzf$n.bin $work/w-skipf$n.bin" "folder with 2 bad files skipped != .npz without them ($n rank(s))"
    check "cmp -s $work/w-npzs$n.bin $work/w-skips$n.bin" "shards with a bad record skipped != .npz without it ($n rank(s))"
done
check "grep -q '2 bad example(s) skipped.*c3/$bad' $work/skipf2.log" "skip report (folder): $(grep -m1 skipped "$work/skipf2.log")"
check "grep -q '1 bad example(s) skipped.*record 1.*data CRC mismatch' $work/skips1.log" "skip report (shards): $(grep -m1 skipped "$work/skips1.log")"
rc=0
timeout 120 mpirun -n 2 "$mw" train --data "$work/badf" --color-mode grayscale --epochs 2 \
    --progress none --checkpoint-dir "$work/ck-fail" >"$work/fail.log" 2>&1 || rc=$?
check "((rc == 3))" "a truncated PNG under mpirun -n 2: exit $rc, expected 3"
check "grep -q 'error: .*badf/train/c3/$bad: a PNG image libpng cannot decode' $work/fail.log" "message: $(grep -m1 error: "$work/fail.log")"
rc=0
"$mw" train --data "$work/bads" --color-mode grayscale --epochs 1 --progress none \
    --checkpoint-dir "$work/ck-fail" >"$work/fail.log" 2>&1 || rc=$?
check "((rc == 3))" "a record with a bad CRC: exit $rc, expected 3"
check "grep -q 'fmnist-train.tfrecord-00003-of-00008: record 1 at byte offset [0-9]*: data CRC mismatch' $work/fail.log" "message: $(grep -m1 error: "$work/fail.log")"
# --validation-split F --validation-seed N on one tree of class folders: the files Keras'
# image_dataset_from_directory(validation_split=F, subset="both", seed=N) puts on each side
check_cmd "$py" "$src/tests/images/check_split.py" "$dl" "$work/folder/train"
train split 2 "$work/folder/train" --validation-split 0.25 --validation-seed 1337
check "grep -q '^Epoch 2,' $work/split.log" "training on a split tree: $(tail -n 1 "$work/split.log")"
expect() { # CODE PATTERN ARG...: mwtrain train exits CODE with PATTERN in its message
    local code=$1 pat=$2 rc=0
    shift 2
    "$mw" train --epochs 1 --progress none --checkpoint-dir "$work/ck-x" "$@" >"$work/x.log" 2>&1 ||
        rc=$?
    check "((rc == code)) && grep -q -- \"$pat\" $work/x.log" \
        "$* -> exit $rc, expected $code and '$pat': $(grep -m1 error: "$work/x.log")"
}
expect 2 "needs --validation-seed N" --data "$work/folder/train" --validation-split 0.2
expect 3 "give --validation-split F and --validation-seed N" --data "$work/folder/train"
expect 3 "has train/ and test already" --data "$work/folder" --validation-split 0.2 \
    --validation-seed 1
expect 3 "holds out 0; expected at least one" --data "$work/folder/train" \
    --validation-split 0.001 --validation-seed 1
# --shard-policy file (AutoShardPolicy.FILE): rank r of 3 takes shards r, r + 3, ... whole
# (240, 240 and 160 examples); with --no-shuffle each step's global batch is 16 examples of each
# rank's shards in shard order, for 10 steps (the rank with 160 sets the epoch: 480 examples).
# The .npz holding exactly that sequence, trained with the default policy and --no-shuffle,
# must give the same bits: then each rank trained on its own shards only.
"$py" - "$work" <<'PY' >"$work/plan.log" 2>&1 || { cat "$work/plan.log"; exit 1; }
import sys
import numpy as np
work = sys.argv[1]
d = dict(np.load(work + "/data.npz"))
per_shard = 80  # folder_data.py: 640 training images in 8 shards, in the .npz's order
lists = [[i for s in range(8) if s % 3 == q for i in range(s * per_shard, (s + 1) * per_shard)]
         for q in range(3)]
order = [i for k in range(10) for q in range(3) for i in lists[q][16 * k:16 * (k + 1)]]
np.savez(work + "/planned.npz", x_train=d["x_train"][order], y_train=d["y_train"][order],
         x_test=d["x_test"], y_test=d["y_test"])
PY
bpr=16 train planned 3 "$work/planned.npz" --no-shuffle
bpr=16 train filepol 3 "$work/shards" --no-shuffle --shard-policy file
check "cmp -s $work/w-planned.bin $work/w-filepol.bin" "--shard-policy file != the planned .npz (3 ranks)"
check "grep -q '8 shards over 3 rank(s), 480 of 640 examples an epoch' $work/filepol.log" \
    "plan line: $(grep -m1 shard-policy "$work/filepol.log")"
train filepol1 1 "$work/shards" --shard-policy file # one rank: every shard, shuffled
check "grep -q '^Epoch 2,' $work/filepol1.log" "--shard-policy file on 1 rank trains"
mkdir "$work/two"
for i in 0 1; do
    cp "$work/shards/fmnist-train.tfrecord-0000$i-of-00008" \
        "$work/two/fmnist-train.tfrecord-0000$i-of-00002"
done
cp "$work/shards"/fmnist-test.* "$work/two/"
rc=0
mpirun -n 3 "$mw" train --data "$work/two" --color-mode grayscale --shard-policy file \
    --progress none --checkpoint-dir "$work/ck-two" >"$work/two.log" 2>&1 || rc=$?
check "((rc == 3)) && grep -q 'needs a shard for every worker: 2 training shards for 3 ranks' $work/two.log" \
    "2 shards for 3 ranks: exit $rc, $(grep -m1 error: "$work/two.log")"
expect 3 "this data is not read from shards" --data "$work/folder" --shard-policy file
train control 1 "$work/folder" --seed 7
check "! cmp -s $work/w-npz1.bin $work/w-control.bin" "control: another seed gives the same weights"
finish folder-train
