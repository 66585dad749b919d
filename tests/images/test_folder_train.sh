#!/usr/bin/env bash
# The tutorial CNN trained from Fashion-MNIST written out as a PNG image folder and as 8 TFRecord
# shards of tf.train.Example (tests/images/folder_data.py, TensorFlow's encoder and writer)
# against the same images as a .npz in the folder's order: the same final weights, bit for bit,
# on 1 rank and under mpirun -n 2 (the examples are decoded where each rank's replicas need
# them, the order is the same global permutation), also with a decoding pool decoding each next
# step ahead (--decode-threads 2). The control: a run with another seed differs.
#   test_folder_train.sh MWTRAIN BUILD_DIR
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
mw=${1:?usage: test_folder_train.sh MWTRAIN BUILD_DIR}
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
        --batch-per-replica $((32 / n)) --progress none --checkpoint-dir "$work/ck-$name" \
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
train control 1 "$work/folder" --seed 7
check "! cmp -s $work/w-npz1.bin $work/w-control.bin" "control: another seed gives the same weights"
finish folder-train
