#!/usr/bin/env bash
# Suite 'keras': KerasHub task models (GPT2CausalLM) read from the arguments in their archive,
# trained 2 steps by mwtrain and by KerasHub 0.32 on Keras 3.15 from the same archive; layouts,
# export and refusals (tests/keras/hub_models.py), in the oracle's venv.
#   hub_models.sh MWTRAIN
set -uo pipefail
mw=${1:?usage: hub_models.sh MWTRAIN}
if ! py=$(bash "$MW_SRCDIR/tests/keras/venv.sh" "$MW_BUILDDIR"); then
    echo "SKIP: no KerasHub oracle environment (tests/keras/venv.sh failed; see above)"
    exit 77
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/mwtest-hub-models-XXXXXX")
trap 'rm -rf "$work"' EXIT
KERAS_BACKEND=jax JAX_PLATFORMS=cpu TF_CPP_MIN_LOG_LEVEL=2 "$py" "$MW_SRCDIR/tests/keras/hub_models.py" \
    "$mw" "$work"
