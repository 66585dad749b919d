#!/usr/bin/env bash
# Suite 'keras': models of several named inputs (x_train.<name> in a .npz: token ids, a padding
# mask, segment ids) trained 2 steps by mwtrain and by Keras 3.15 + KerasHub 0.32 from the same
# archive; layouts, export and refusals (tests/keras/named_inputs.py), in the oracle's venv.
#   named_inputs.sh MWTRAIN
set -uo pipefail
mw=${1:?usage: named_inputs.sh MWTRAIN}
if ! py=$(bash "$MW_SRCDIR/tests/keras/venv.sh" "$MW_BUILDDIR"); then
    echo "SKIP: no KerasHub oracle environment (tests/keras/venv.sh failed; see above)"
    exit 77
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/mwtest-named-inputs-XXXXXX")
trap 'rm -rf "$work"' EXIT
KERAS_BACKEND=jax JAX_PLATFORMS=cpu TF_CPP_MIN_LOG_LEVEL=2 "$py" "$MW_SRCDIR/tests/keras/named_inputs.py" \
    "$mw" "$work"
