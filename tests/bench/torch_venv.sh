#!/usr/bin/env bash
# The PyTorch peer's environment: the package registry's torch 2.5.1 wheel (with the CUDA
# libraries it depends on; the peers here run on the CPU) and numpy in BUILD_DIR/torch-venv,
# made by tests/keras/venv.sh as the oracles' is, for tests/bench/peer_torch_lm.py. The
# product never needs Python.
#
#   tests/bench/torch_venv.sh BUILD_DIR     -> prints the venv's python on stdout
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
exec bash "$here/../keras/venv.sh" "${1:?usage: torch_venv.sh BUILD_DIR}" torch-venv \
    torch==2.5.1 'numpy==2.0.2'
