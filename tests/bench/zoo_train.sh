#!/usr/bin/env bash
# keras.applications' ResNet50V2 and MobileNetV2 trained for real on Fashion-MNIST padded to
# 32x32x3 (10,000 images, 10 epochs): mwtrain under `mpirun -n 2` against Keras' fit on
# TensorFlow from the same archive over 3 seeds; tests/bench/zoo_train.py says what is
# compared and why. Each training's result is kept in WORKDIR (default: a fresh temporary one)
# so that a table this long (hours on 2 cores) can be made over several sittings. Needs the
# Keras oracle's venv (tests/keras/venv.sh) and TensorFlow's (tests/bench/tf_venv.sh); 77
# without them.
#   zoo_train.sh MWTRAIN [WORKDIR] [MODEL...]   (default ResNet50V2 MobileNetV2)
set -euo pipefail
mwtrain=$(readlink -f "$1") keep=${2:-}
models=("${@:3}")
((${#models[@]})) || models=(ResNet50V2 MobileNetV2)
src=$(cd "$(dirname "$0")/../.." && pwd)
build=${MW_BUILDDIR:-$(dirname "$(dirname "$mwtrain")")}
if ! py=$(bash "$src/tests/keras/venv.sh" "$build") ||
    ! tfpy=$(bash "$src/tests/bench/tf_venv.sh" "$build"); then
    echo "zoo_train: no Keras or TensorFlow environment (tests/keras/venv.sh, tf_venv.sh)" >&2
    exit 77
fi
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh" # the Open MPI environment (tests/openmpi.env)
export JAX_PLATFORMS=cpu TF_CPP_MIN_LOG_LEVEL=3
unset OMP_NUM_THREADS OPENBLAS_NUM_THREADS
if [[ -n $keep ]]; then
    work=$keep
else
    work=$(mktemp -d "${TMPDIR:-/tmp}/mwbench-zootrain-XXXXXX")
    trap 'rm -rf "$work"' EXIT
fi
rc=0
for m in "${models[@]}"; do
    # keras.applications' MobileNetV2 keeps its moving statistics with momentum 0.999: after
    # these 1,570 steps a fifth of each is still its initial value, and inference collapses to
    # one class in Keras and in mwtrain alike (both 10.00 %); 0.99 makes the test accuracy mean
    # something (training itself is the same bits)
    extra=()
    [[ $m == MobileNetV2 ]] && extra=(--bn-momentum 0.99)
    "$py" "$src/tests/bench/zoo_train.py" "$mwtrain" "$work" "$m" --keras-python "$tfpy" \
        --keras-backend tensorflow --mw-seeds 3 "${extra[@]}" || rc=1
done
exit $rc
