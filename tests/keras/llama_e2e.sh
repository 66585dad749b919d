#!/usr/bin/env bash
# Suite 'keras': KerasHub's LlamaTransformerDecoder (grouped-query attention) trained 2 steps by
# mwtrain and by KerasHub 0.32 on Keras 3.15 from the same archive, with controls; layouts, export
# and refusals (tests/keras/llama_e2e.py), in the oracle's venv (tests/keras/venv.sh).
#   llama_e2e.sh MWTRAIN
set -uo pipefail
mw=${1:?usage: llama_e2e.sh MWTRAIN}
if ! py=$(bash "$MW_SRCDIR/tests/keras/venv.sh" "$MW_BUILDDIR"); then
    echo "SKIP: no KerasHub oracle environment (tests/keras/venv.sh failed; see above)"
    exit 77
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/mwtest-llama-e2e-XXXXXX")
trap 'rm -rf "$work"' EXIT
KERAS_BACKEND=jax JAX_PLATFORMS=cpu TF_CPP_MIN_LOG_LEVEL=2 "$py" "$MW_SRCDIR/tests/keras/llama_e2e.py" \
    "$mw" "$work"
