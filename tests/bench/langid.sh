#!/usr/bin/env bash
# Language identification of single words from Debian's word lists, mwtrain (`mpirun -n 2`)
# against Keras 3 on the same model and steps: tests/bench/langid.py says how. Needs the word
# lists (deploy/setup.sh installs wamerican, wngerman, wfrench, wspanish) and the Keras
# environment (tests/keras/venv.sh); 77 without the latter.
#   langid.sh MWTRAIN [per-language=4000] [epochs=15]
set -euo pipefail
mwtrain=$(readlink -f "$1") per=${2:-4000} epochs=${3:-15}
src=$(cd "$(dirname "$0")/../.." && pwd)
build=${MW_BUILDDIR:-$(dirname "$(dirname "$mwtrain")")}
if ! py=$(bash "$src/tests/keras/venv.sh" "$build"); then
    echo "langid: no Keras environment (tests/keras/venv.sh failed)" >&2
    exit 77
fi
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh" # the Open MPI environment (tests/openmpi.env)
export KERAS_BACKEND=jax JAX_PLATFORMS=cpu
work=$(mktemp -d "${TMPDIR:-/tmp}/mwbench-langid-XXXXXX")
trap 'rm -rf "$work"' EXIT
"$py" "$src/tests/bench/langid.py" "$mwtrain" "$work" --per-language "$per" --epochs "$epochs"
