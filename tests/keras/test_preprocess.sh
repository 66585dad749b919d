#!/usr/bin/env bash
# Keras preprocessing layers (worker/data/preprocess.h) against real Keras 3.15 (tests/keras/venv.sh):
# every layer at inference and, with its random choice forced, in training; see
# check_preprocess.py. Skips (77) when the oracle environment cannot be made.
#   test_preprocess.sh PREPROCESS_APPLY BUILD_DIR
set -uo pipefail
src=${MW_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
if ! py=$(bash "$src/tests/keras/venv.sh" "$2"); then
    echo "skip: the Keras oracle environment could not be made (tests/keras/venv.sh)"
    exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
KERAS_BACKEND=jax JAX_PLATFORMS=cpu "$py" "$src/tests/keras/check_preprocess.py" "$1" "$tmp"
