#!/usr/bin/env bash
# AdamW against Keras 3.15 on TensorFlow 2.18 (tests/bench/adamw_keras.py says what it shows):
# makes the venv under the build directory (tests/keras/venv.sh) and runs the script.
#   adamw_keras.sh BUILD_DIR
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=${1:?usage: adamw_keras.sh BUILD_DIR}
py=$(bash "$here/../keras/venv.sh" "$build" tf-keras315-venv \
    tensorflow-cpu==2.18.0 keras==3.15.0 'numpy==2.0.2')
MW_BUILDDIR=$(cd "$build" && pwd) exec "$py" "$here/adamw_keras.py"
