#!/usr/bin/env bash
# An image folder and the same files as TFRecord shards, read by mwtrain's --data readers
# (tests/images/data_load), against Keras' image_dataset_from_directory (folder_pixels.py) in
# the TensorFlow venv (tests/bench/tf_venv.sh). Skips (77) when that environment cannot be made.
#   test_folder_pixels.sh DATA_LOAD BUILD_DIR
set -uo pipefail
src=${MW_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
if ! py=$(bash "$src/tests/bench/tf_venv.sh" "$2" 2>/dev/null); then
    echo "skip: the TensorFlow environment could not be made (tests/bench/tf_venv.sh)"
    exit 77
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/mwtest-folderpix-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
"$py" "$src/tests/images/folder_pixels.py" "$1" "$tmp"
