#!/usr/bin/env bash
# Suite 'keras': KerasHub's ViTPatchingAndEmbedding and ViTEncoder (and x[:, 0], a GetItem)
# trained 2 steps by mwtrain and by KerasHub 0.32 on Keras 3.15 from the same archive; layouts,
# exports and refusals (tests/keras/vit_e2e.py), in the oracle's venv (tests/keras/venv.sh).
#   vit_e2e.sh MWTRAIN
set -uo pipefail
mw=${1:?usage: vit_e2e.sh MWTRAIN}
if ! py=$(bash "$MW_SRCDIR/tests/keras/venv.sh" "$MW_BUILDDIR"); then
    echo "SKIP: no KerasHub oracle environment (tests/keras/venv.sh failed; see above)"
    exit 77
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/mwtest-vit-e2e-XXXXXX")
trap 'rm -rf "$work"' EXIT
KERAS_BACKEND=jax JAX_PLATFORMS=cpu TF_CPP_MIN_LOG_LEVEL=2 "$py" "$MW_SRCDIR/tests/keras/vit_e2e.py" \
    "$mw" "$work"
