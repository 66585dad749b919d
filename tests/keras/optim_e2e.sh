#!/usr/bin/env bash
# Suite 'keras': the tutorial CNN under every optimizer and schedule against real
# Keras (tests/keras/optim_e2e.py).   optim_e2e.sh MWTRAIN
set -uo pipefail
mw=${1:?usage: optim_e2e.sh MWTRAIN}
if [[ ! -r /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]]; then
    echo "SKIP: no Fashion-MNIST in /usr/share/datasets/fashion-mnist (deploy/setup.sh)"
    exit 77
fi
if ! py=$(bash "$MW_SRCDIR/tests/keras/venv.sh" "$MW_BUILDDIR"); then
    echo "SKIP: no Keras oracle environment (tests/keras/venv.sh failed; see above)"
    exit 77
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/mwtest-optim-e2e-XXXXXX")
trap 'rm -rf "$work"' EXIT
KERAS_BACKEND=jax JAX_PLATFORMS=cpu "$py" "$MW_SRCDIR/tests/keras/optim_e2e.py" "$mw" "$work"
