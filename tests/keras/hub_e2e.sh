#!/usr/bin/env bash
# Suite 'keras': KerasHub's TokenAndPositionEmbedding and PositionEmbedding trained 2 steps by
# mwtrain and by KerasHub 0.32 on Keras 3.15 from the same archive; layouts, exports and
# refusals (tests/keras/hub_e2e.py). KerasHub 0.32 needs Keras 3.15, so it has its own venv
# beside the Keras 3.6 oracle's: hub-venv. KerasHub is installed without its declared
# dependencies and with the ones its layers import (tokenizers, sentencepiece, regex,
# kagglehub): the tensorflow-text it also declares brings a TensorFlow wheel (about a minute of
# CI) that its Keras layers on JAX never import.
#   hub_e2e.sh MWTRAIN
set -uo pipefail
mw=${1:?usage: hub_e2e.sh MWTRAIN}
if ! py=$(bash "$MW_SRCDIR/tests/keras/venv.sh" "$MW_BUILDDIR" hub-venv keras==3.15.0 \
    'jax[cpu]==0.10.2' 'numpy==2.0.2' h5py==3.14.0 tokenizers==0.23.3 sentencepiece==0.2.3 \
    regex kagglehub packaging absl-py) ||
    ! { "$py" -c 'import keras_hub' 2>/dev/null ||
        "$py" -m pip install -q --disable-pip-version-check --no-deps keras-hub==0.32.0 >&2; }; then
    echo "SKIP: no KerasHub oracle environment (tests/keras/venv.sh or pip failed; see above)"
    exit 77
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/mwtest-hub-e2e-XXXXXX")
trap 'rm -rf "$work"' EXIT
KERAS_BACKEND=jax JAX_PLATFORMS=cpu TF_CPP_MIN_LOG_LEVEL=2 "$py" "$MW_SRCDIR/tests/keras/hub_e2e.py" \
    "$mw" "$work"
