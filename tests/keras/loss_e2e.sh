#!/usr/bin/env bash
# Suite 'keras': every loss and metric (docs/losses.md) trained 2 steps by mwtrain and by real
# Keras from the same weights, and two of them under other layouts (tests/keras/loss_e2e.py).
#   loss_e2e.sh MWTRAIN
set -uo pipefail
mw=${1:?usage: loss_e2e.sh MWTRAIN}
if ! py=$(bash "$MW_SRCDIR/tests/keras/venv.sh" "$MW_BUILDDIR"); then
    echo "SKIP: no Keras oracle environment (tests/keras/venv.sh failed; see above)"
    exit 77
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/mwtest-loss-e2e-XXXXXX")
trap 'rm -rf "$work"' EXIT
KERAS_BACKEND=jax JAX_PLATFORMS=cpu "$py" "$MW_SRCDIR/tests/keras/loss_e2e.py" "$mw" "$work"
