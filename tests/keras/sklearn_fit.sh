#!/usr/bin/env bash
# Suite 'keras': scikit-learn's bundled data sets (breast cancer, diabetes, digits), converted
# by tests/data/sklearn_npz.py, trained by `mpirun -n 2 mwtrain` and by Keras' fit from the
# same .keras archive; the final test metric and loss within Keras' own spread over shuffle
# seeds (tests/keras/sklearn_fit.py).   sklearn_fit.sh MWTRAIN
# The Keras oracle's venv (tests/keras/venv.sh), which has scikit-learn.
set -uo pipefail
mw=${1:?usage: sklearn_fit.sh MWTRAIN}
if ! command -v mpirun >/dev/null; then
    echo "SKIP: no mpirun on the PATH"
    exit 77
fi
if ! py=$(bash "$MW_SRCDIR/tests/keras/venv.sh" "$MW_BUILDDIR"); then
    echo "SKIP: no Keras + scikit-learn environment (tests/keras/venv.sh failed; see above)"
    exit 77
fi
if ! "$py" -c 'import sklearn.datasets' 2>/dev/null; then
    echo "SKIP: scikit-learn does not import in $py"
    exit 77
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/mwtest-sklearn-fit-XXXXXX")
trap 'rm -rf "$work"' EXIT
KERAS_BACKEND=jax JAX_PLATFORMS=cpu "$py" "$MW_SRCDIR/tests/keras/sklearn_fit.py" "$mw" "$work"
