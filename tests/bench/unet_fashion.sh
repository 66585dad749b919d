#!/usr/bin/env bash
# A U-Net on Fashion-MNIST segmentation (11 classes per pixel, softmax output) trained by mwtrain
# and by Keras' fit (JAX, CPU) from the same archive on the same batches: each epoch's loss and
# pixel accuracy of both sides, and their wall times (tests/keras/unet_e2e.py --bench says what
# is asserted and why).   unet_fashion.sh MWTRAIN [IMAGES [EPOCHS]]
set -uo pipefail
mw=${1:?usage: unet_fashion.sh MWTRAIN [IMAGES [EPOCHS]]}
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${MW_BUILDDIR:-$(cd "$(dirname "$mw")/.." && pwd)}
if ! py=$(bash "$src/tests/keras/venv.sh" "$build"); then
    echo "SKIP: no Keras oracle environment (tests/keras/venv.sh failed; see above)"
    exit 77
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/mwbench-unet-XXXXXX")
trap 'rm -rf "$work"' EXIT
MW_BUILDDIR=$build KERAS_BACKEND=jax JAX_PLATFORMS=cpu PYTHONPATH="$src/tests/keras" \
    "$py" "$src/tests/keras/unet_e2e.py" "$mw" "$work" --bench "${2:-2000}" "${3:-3}"
