#!/usr/bin/env bash
# PyTorch's venv (tests/bench/torch_venv.sh) with torchvision and Pillow added, for the
# decoding benchmark's DataLoader peers (tests/bench/decode_throughput.py): torchvision 0.29.2,
# the newest the package registry serves (it asks for torch >= 2.14, so pip leaves the venv's
# torch 2.15.0 as it is; built for the same CUDA 13.2 as that torch), brings libjpeg-turbo for
# torchvision.io.decode_jpeg; Pillow 13.0.0 decodes for the PIL peer.
# Added once, under the venv's lock, and kept while both import at these versions; the torch
# venv's own stamp is untouched. The product never needs Python.
#
#   tests/bench/torchvision_venv.sh BUILD_DIR     -> prints the venv's python on stdout
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=${1:?usage: torchvision_venv.sh BUILD_DIR}
py=$(bash "$here/torch_venv.sh" "$build")
pins=(torchvision==0.29.2 pillow==13.0.0)
check='import torchvision, PIL; assert torchvision.__version__.startswith("0.29.2") and PIL.__version__ == "13.0.0"'
exec 9>"$build/.torch-venv.lock"
flock -w 900 9 || { echo "torchvision_venv.sh: waited 900 s for $build/.torch-venv.lock" >&2; exit 1; }
if ! "$py" -c "$check" 2>/dev/null; then
    echo "torchvision_venv.sh: adding ${pins[*]} to $(dirname "$(dirname "$py")")" >&2
    if ! "$(dirname "$py")/pip" install -q --disable-pip-version-check "${pins[@]}" >&2; then
        echo "torchvision_venv.sh: pip could not install ${pins[*]}" >&2
        exit 1
    fi
fi
echo "$py"
