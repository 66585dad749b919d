#!/usr/bin/env bash
# Install every Debian package mwtrain needs to build, test and train.
# Idempotent and non-interactive; run as root (or with sudo available).
#   deploy/setup.sh            build, test and training dependencies
#   deploy/setup.sh --peer     also PyTorch (python3-torch), for the peer benchmark
#                              and for regenerating tests/data/cnn_fixture.bin
set -euo pipefail

pkgs=(
    build-essential meson ninja-build pkg-config   # toolchain
    libopenmpi-dev openmpi-bin                     # MPI
    libjansson-dev zlib1g-dev libcmocka-dev        # JSON, gzip/CRC32, unit tests
    libopenblas-dev libdnnl-dev                    # CPU matrix products (oneDNN sgemm, CBLAS fallback)
    dataset-fashion-mnist                          # the default data set
    python3 python3-numpy                          # test helpers (safetensors read-back)
    python3-venv                                   # tests/keras/venv.sh: the Keras/TensorBoard oracle
    libhdf5-dev libzip-dev                         # .keras archives: model.weights.h5 in a zip
    protobuf-c-compiler libprotobuf-c-dev          # TFRecord shards: the tf.train.Example parser
    libjpeg62-turbo-dev libpng-dev libgif-dev      # image folders: JPEG, PNG, GIF (worker/data/image_decode.c)
    clang libclang-rt-14-dev                       # libFuzzer targets (fuzzer runtime)
    clang-format                                   # tests/style: the .clang-format check
    valgrind                                       # memory checks in tests
    time                                           # GNU time: peak memory in tests/mpi
    strace                                         # tests/mpi/test_singleton.sh: what MPI_Init opens
    yamllint                                       # deploy/ manifests (tests/deploy)
    wamerican wngerman wfrench wspanish            # word lists: the language-ID data set (tests/bench/langid.py)
)
if [[ ${1:-} == --peer ]]; then
    pkgs+=(python3-torch)
fi

missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
    echo "setup: all ${#pkgs[@]} packages already installed"
    exit 0
fi

sudo=""
if [[ $(id -u) != 0 ]]; then
    command -v sudo >/dev/null || { echo "setup: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
    sudo=sudo
fi
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q
$sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
