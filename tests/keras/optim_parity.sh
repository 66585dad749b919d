#!/usr/bin/env bash
# Suite 'keras': optimizer and schedule parity with real Keras (tests/keras/optim_parity.py).
#   optim_parity.sh DRIVER      (MW_SRCDIR and MW_BUILDDIR from meson's test environment)
set -uo pipefail
driver=${1:?usage: optim_parity.sh DRIVER}
if ! py=$(bash "$MW_SRCDIR/tests/keras/venv.sh" "$MW_BUILDDIR"); then
    echo "SKIP: no Keras oracle environment (tests/keras/venv.sh failed; see above)"
    exit 77
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/mwtest-optim-parity-XXXXXX")
trap 'rm -rf "$work"' EXIT
KERAS_BACKEND=jax JAX_PLATFORMS=cpu "$py" "$MW_SRCDIR/tests/keras/optim_parity.py" "$driver" "$work"
