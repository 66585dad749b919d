#!/usr/bin/env bash
# The TensorFlow peer's environment: tensorflow-cpu (with Keras 3 on its TensorFlow backend)
# and numpy in BUILD_DIR/tf-venv, made by tests/keras/venv.sh as the oracles' is, for
# tests/bench/peer_tf.py. The product never needs Python.
#
#   tests/bench/tf_venv.sh BUILD_DIR     -> prints the venv's python on stdout
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
exec bash "$here/../keras/venv.sh" "${1:?usage: tf_venv.sh BUILD_DIR}" tf-venv \
    tensorflow-cpu==2.18.0 keras==3.6.0 'numpy==2.0.2'
