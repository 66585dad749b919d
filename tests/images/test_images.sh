#!/usr/bin/env bash
# mwtrain's decoded and resized image pixels against TensorFlow's (check_images.py) in the
# TensorFlow venv (tests/bench/tf_venv.sh). Skips (77) when that environment cannot be made.
#   test_images.sh IMAGE_LOAD CMYK_JPEG BUILD_DIR
set -uo pipefail
src=${MW_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
if ! py=$(bash "$src/tests/bench/tf_venv.sh" "$3" 2>/dev/null); then
    echo "skip: the TensorFlow environment could not be made (tests/bench/tf_venv.sh)"
    exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$py" "$src/tests/images/check_images.py" "$1" "$2" "$tmp"
