#!/usr/bin/env bash
# Suite 'keras': the RMS normalizations (Keras' RMSNormalization, LayerNormalization(rms_scaling),
# KerasHub's LlamaLayerNorm and Gemma's RMSNormalization) trained 2 steps by mwtrain and by Keras
# from the same archive, exported, refused (tests/keras/rms_e2e.py).   rms_e2e.sh MWTRAIN
set -uo pipefail
mw=${1:?usage: rms_e2e.sh MWTRAIN}
if ! py=$(bash "$MW_SRCDIR/tests/keras/venv.sh" "$MW_BUILDDIR"); then
    echo "SKIP: no Keras oracle environment (tests/keras/venv.sh failed; see above)"
    exit 77
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/mwtest-rms-e2e-XXXXXX")
trap 'rm -rf "$work"' EXIT
KERAS_BACKEND=jax JAX_PLATFORMS=cpu "$py" "$MW_SRCDIR/tests/keras/rms_e2e.py" "$mw" "$work"
