#!/usr/bin/env bash
# Suite 'keras': token models (Embedding, GlobalAverage/MaxPooling1D) trained 2 steps by
# mwtrain and by real Keras from the same archive; layouts, export and bad token data
# (tests/keras/text_e2e.py).   text_e2e.sh MWTRAIN
set -uo pipefail
mw=${1:?usage: text_e2e.sh MWTRAIN}
if ! py=$(bash "$MW_SRCDIR/tests/keras/venv.sh" "$MW_BUILDDIR"); then
    echo "SKIP: no Keras oracle environment (tests/keras/venv.sh failed; see above)"
    exit 77
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/mwtest-text-e2e-XXXXXX")
trap 'rm -rf "$work"' EXIT
KERAS_BACKEND=jax JAX_PLATFORMS=cpu "$py" "$MW_SRCDIR/tests/keras/text_e2e.py" "$mw" "$work"
