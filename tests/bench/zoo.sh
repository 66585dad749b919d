#!/usr/bin/env bash
# The keras.applications table: every family at its smallest size, one SGD step through
# `mwtrain train` and `export` against Keras' float64 step, beside Keras' own float32 distance,
# and the export's evaluate() against mwtrain's test loss (tests/keras/zoo/zoo.py). Minutes per
# model on 2 cores (Keras' float64 step of a whole model); CI runs the small reproductions only.
#
#   tests/bench/zoo.sh BUILD_DIR [MODEL...]      (default: all)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=$(cd "${1:?usage: zoo.sh BUILD_DIR [MODEL...]}" && pwd)
shift
MW_BUILDDIR=$build exec bash "$here/../keras/run.sh" zoo/zoo.py "$build/worker/mwtrain" "${@:-all}"
