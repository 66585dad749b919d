#!/usr/bin/env bash
# Run parity.py with the Keras environment: parity.sh DRIVER PARITY_PY.
# Exit 77 (skip, with the reason) when the environment cannot be made.
set -euo pipefail
driver=${1:?usage: parity.sh DRIVER PARITY_PY}
script=${2:?usage: parity.sh DRIVER PARITY_PY}
build=${MW_BUILDDIR:?MW_BUILDDIR is not set (run through meson test)}
if ! py=$(bash "$MW_SRCDIR/tests/keras/venv.sh" "$build"); then
    echo "SKIP: the Keras environment could not be made (see venv.sh's message above)"
    exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
KERAS_BACKEND=jax JAX_PLATFORMS=cpu "$py" "$script" "$driver" "$work"
