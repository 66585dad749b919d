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
# ONEDNN_MAX_CPU_ISA is meant for mwtrain's kernels (deploy/local/test.sh's AVX2 pass): the
# oracle keeps the host's own, since XLA's CPU kernels read the variable too (under AVX2 its
# ResNet gradients moved by 5e-3, ReLU choices flipping, while mwtrain's ref and cpu agreed);
# parity.py hands it back to the driver
MW_DRIVER_ONEDNN_MAX_CPU_ISA=${ONEDNN_MAX_CPU_ISA:-} KERAS_BACKEND=jax JAX_PLATFORMS=cpu \
    env -u ONEDNN_MAX_CPU_ISA "$py" "$script" "$driver" "$work"
