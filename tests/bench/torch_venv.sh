#!/usr/bin/env bash
# The PyTorch peers' environment: the package registry's newest torch, 2.15.0 (with the CUDA
# libraries it depends on; the peers here run on the CPU), Hugging Face transformers 5.24.0 (the
# GPT-2 and Llama a PyTorch user would train) and numpy in BUILD_DIR/torch-venv, made by
# tests/keras/venv.sh as the oracles' is, for tests/bench/peer_torch_lm.py,
# peer_torch_llama.py and peer_torch_zoo.py. The product never needs Python.
#
#   tests/bench/torch_venv.sh BUILD_DIR     -> prints the venv's python on stdout
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
exec bash "$here/../keras/venv.sh" "${1:?usage: torch_venv.sh BUILD_DIR}" torch-venv \
    torch==2.15.0 transformers==5.24.0 'numpy==2.0.2'
