#!/usr/bin/env bash
# Decoding throughput on the same JPEG files with the same cores: mwtrain's data pipeline
# (tests/images/data_load: an image folder and TFRecord shards, as --data reads them) against
# tf.data (keras.utils.image_dataset_from_directory, and a TFRecordDataset map) and PyTorch
# DataLoaders (torchvision.io.decode_jpeg, and PIL), every image decoded and resized to
# 224x224 RGB float32 in batches of 64, with 1 core and with all (taskset; each program told
# its thread count). IMAGES training files (default 2000, 200 to 300 pixels a side, quality 90)
# are made in a temporary folder and as 8 TFDS-named shards of the same bytes, read once into
# the page cache, then ROUNDS rounds (default 3) alternate the programs; prints each run, the
# table of medians (images/s and images/s per core) and mwtrain's ratio to the fastest peer.
# tests/bench/decode_throughput.py has the details.
#   decode_throughput.sh DATA_LOAD [images=2000] [rounds=3]
# Needs tests/bench/tf_venv.sh's venv (77 without); the PyTorch rows
# (tests/bench/torchvision_venv.sh) are reported as skipped when it cannot be made.
set -euo pipefail
data_load=$(readlink -f "${1:?usage: decode_throughput.sh DATA_LOAD [images] [rounds]}")
images=${2:-2000} rounds=${3:-3}
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${MW_BUILDDIR:-$(dirname "$(dirname "$(dirname "$data_load")")")}
if ! tfpy=$(bash "$src/tests/bench/tf_venv.sh" "$build"); then
    echo "decode_throughput: no TensorFlow environment (tests/bench/tf_venv.sh failed)" >&2
    exit 77
fi
torchpy=$(bash "$src/tests/bench/torchvision_venv.sh" "$build") || torchpy=
unset OMP_NUM_THREADS
export TF_CPP_MIN_LOG_LEVEL=3
work=$(mktemp -d "${TMPDIR:-/tmp}/mwbench-decode-XXXXXX")
trap 'rm -rf "$work"' EXIT
py=$src/tests/bench/decode_throughput.py
"$tfpy" "$py" make "$work/data" "$images" --test 100 2>/dev/null
"$tfpy" "$py" run --data-load "$data_load" --tf-python "$tfpy" --torch-python "$torchpy" \
    --data "$work/data" --rounds "$rounds"
