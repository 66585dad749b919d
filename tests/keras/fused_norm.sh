#!/usr/bin/env bash
# Suite 'keras': the residual Add fused with its sum's normalization trains to the same bits as
# the unfused layers (MW_FUSE=0), post-norm and pre-norm models (tests/keras/fused_norm.py), in
# the oracle's venv (tests/keras/venv.sh; Keras builds the archives).
#   fused_norm.sh MWTRAIN
set -uo pipefail
mw=${1:?usage: fused_norm.sh MWTRAIN}
if ! py=$(bash "$MW_SRCDIR/tests/keras/venv.sh" "$MW_BUILDDIR"); then
    echo "SKIP: no Keras oracle environment (tests/keras/venv.sh failed; see above)"
    exit 77
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/mwtest-fused-norm-XXXXXX")
trap 'rm -rf "$work"' EXIT
KERAS_BACKEND=jax JAX_PLATFORMS=cpu TF_CPP_MIN_LOG_LEVEL=2 "$py" "$MW_SRCDIR/tests/keras/fused_norm.py" \
    "$mw" "$work"
