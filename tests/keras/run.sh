#!/usr/bin/env bash
# Run one oracle script of this folder with the venv's python (real Keras, TensorBoard, h5py):
#
#   tests/keras/run.sh SCRIPT.py [ARGS]      (MW_BUILDDIR: the build directory, set by meson)
#
# Skips (exit 77, with the reason) when the venv cannot be made (no package registry) or the
# Fashion-MNIST files are not installed; otherwise the script's own exit status.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=${MW_BUILDDIR:?MW_BUILDDIR must name the build directory}
if [[ ! -f /usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz ]]; then
    echo "SKIP: /usr/share/datasets/fashion-mnist is not installed (dataset-fashion-mnist)"
    exit 77
fi
if ! py=$(bash "$here/venv.sh" "$build"); then
    echo "SKIP: the Keras oracle venv could not be made (see venv.sh's message above)"
    exit 77
fi
script=$1
shift
KERAS_BACKEND=jax PYTHONPATH="$here" exec "$py" "$here/$script" "$@"
