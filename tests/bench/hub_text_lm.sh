#!/usr/bin/env bash
# A KerasHub causal LM (LlamaCausalLM, or GPT2CausalLM) on Debian's license texts split by file,
# mwtrain (`mpirun -n 2`) against KerasHub's own training of the same archive over 3 shuffle
# seeds: tests/bench/hub_text_lm.py says how. Needs the Keras environment (tests/keras/venv.sh);
# 77 without it.
#   hub_text_lm.sh MWTRAIN [arch=llama] [epochs=3] [windows=3000]
set -euo pipefail
mwtrain=$(readlink -f "$1") arch=${2:-llama} epochs=${3:-3} windows=${4:-3000}
src=$(cd "$(dirname "$0")/../.." && pwd)
build=${MW_BUILDDIR:-$(dirname "$(dirname "$mwtrain")")}
if ! py=$(bash "$src/tests/keras/venv.sh" "$build"); then
    echo "hub_text_lm: no Keras environment (tests/keras/venv.sh failed)" >&2
    exit 77
fi
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh" # the Open MPI environment (tests/openmpi.env)
export KERAS_BACKEND=jax JAX_PLATFORMS=cpu
work=$(mktemp -d "${TMPDIR:-/tmp}/mwbench-hub-text-XXXXXX")
trap 'rm -rf "$work"' EXIT
"$py" "$src/tests/bench/hub_text_lm.py" "$mwtrain" "$work" --arch "$arch" --epochs "$epochs" \
    --windows "$windows"
