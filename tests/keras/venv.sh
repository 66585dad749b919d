#!/usr/bin/env bash
# The oracle environment: real Keras 3.15 (JAX CPU backend) with KerasHub 0.32, TensorBoard's
# event reader, h5py, numpy and scikit-learn (its bundled data sets: tests/keras/sklearn_fit.py),
# in a virtual environment under the build directory. KerasHub is installed without its declared
# dependencies, with the ones its layers import (tokenizers, sentencepiece, regex, kagglehub):
# the tensorflow-text it also declares brings a TensorFlow wheel (about a minute of CI) that
# its Keras layers on JAX never import.
# Tests compare mwtrain against these; the product never needs Python.
#
#   tests/keras/venv.sh BUILD_DIR     -> prints the venv's python on stdout
#   tests/keras/venv.sh BUILD_DIR NAME PIN... [--no-deps PIN...]
#                                 another venv, BUILD_DIR/NAME, of those pins (the ones after
#                                 --no-deps installed without their dependencies)
#                                 (tests/bench/tf_venv.sh: TensorFlow's)
#
# Made once and reused while its stamp matches the pinned versions below;
# concurrent callers (meson runs tests in parallel) wait on one lock.
# Needs Debian's python3-venv (deploy/setup.sh) and the package registry.
set -euo pipefail
build=${1:?usage: venv.sh BUILD_DIR [NAME PIN...]}
name=${2:-keras-venv}
venv="$build/$name"
pins=(keras==3.15.0 'jax[cpu]==0.10.2' tensorboard==2.18.0 h5py==3.14.0 'numpy==2.0.2'
    scipy==1.14.1 scikit-learn==1.5.2 tokenizers==0.23.3 sentencepiece==0.2.3 regex kagglehub
    packaging absl-py)
nodeps=(keras-hub==0.32.0) # installed after the pins, without their declared dependencies
if (($# > 2)); then
    pins=() nodeps=()
    for a in "${@:3}"; do
        if [[ $a == --no-deps ]]; then
            sink=nodeps
        elif [[ ${sink:-pins} == nodeps ]]; then
            nodeps+=("$a")
        else
            pins+=("$a")
        fi
    done
fi
stamp="${pins[*]} ${nodeps[*]}"
mkdir -p "$build"
exec 9>"$build/.$name.lock"
flock -w 900 9 || { echo "venv.sh: waited 900 s for $build/.$name.lock" >&2; exit 1; }
if [[ ! -x $venv/bin/python || $(cat "$venv/.mw-stamp" 2>/dev/null) != "$stamp" ]]; then
    echo "venv.sh: creating $venv (${pins[*]})" >&2
    rm -rf "$venv"
    /usr/bin/python3 -m venv "$venv"
    if ! "$venv/bin/pip" install -q --disable-pip-version-check "${pins[@]}" >&2 ||
        { ((${#nodeps[@]})) && ! "$venv/bin/pip" install -q --disable-pip-version-check \
            --no-deps "${nodeps[@]}" >&2; }; then
        rm -rf "$venv"
        echo "venv.sh: pip could not install ${pins[*]} (is the package registry reachable?)" >&2
        exit 1
    fi
    echo "$stamp" >"$venv/.mw-stamp"
fi
echo "$venv/bin/python"
