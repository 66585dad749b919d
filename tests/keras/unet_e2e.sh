#!/usr/bin/env bash
# Suite 'keras': a U-Net on Fashion-MNIST segmentation (labels (N, 32, 32)) trained 8 steps by
# mwtrain and by real Keras from the same archive; the export, and the refused label shapes
# and interpolation (tests/keras/unet_e2e.py).   unet_e2e.sh MWTRAIN
set -uo pipefail
mw=${1:?usage: unet_e2e.sh MWTRAIN}
if ! py=$(bash "$MW_SRCDIR/tests/keras/venv.sh" "$MW_BUILDDIR"); then
    echo "SKIP: no Keras oracle environment (tests/keras/venv.sh failed; see above)"
    exit 77
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/mwtest-unet-e2e-XXXXXX")
trap 'rm -rf "$work"' EXIT
KERAS_BACKEND=jax JAX_PLATFORMS=cpu PYTHONPATH="$MW_SRCDIR/tests/keras" \
    "$py" "$MW_SRCDIR/tests/keras/unet_e2e.py" "$mw" "$work"
