#!/usr/bin/env bash
# The TensorFlow peer's environment: TensorFlow 2.21 with Keras 3.15 on its TensorFlow backend
# (the oracle's Keras, so that it reads the archives the oracle's venv saves) and KerasHub 0.32
# (without its declared dependencies, with the ones its layers import), in
# BUILD_DIR/tf-venv, made by tests/keras/venv.sh as the oracle's is, for the benchmarks' Keras
# peers. The product never needs Python.
#
#   tests/bench/tf_venv.sh BUILD_DIR     -> prints the venv's python on stdout
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
exec bash "$here/../keras/venv.sh" "${1:?usage: tf_venv.sh BUILD_DIR}" tf-venv \
    tensorflow==2.21.0 keras==3.15.0 'numpy==2.0.2' tokenizers==0.23.3 sentencepiece==0.2.3 regex \
    kagglehub packaging --no-deps keras-hub==0.32.0
