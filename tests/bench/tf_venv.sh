#!/usr/bin/env bash
# The TensorFlow peer's environment: tensorflow-cpu (with Keras 3 on its
# TensorFlow backend) and numpy, in a virtual environment under the build
# directory, for tests/bench/peer_tf.py. The product never needs Python.
#
#   tests/bench/tf_venv.sh BUILD_DIR     -> prints the venv's python on stdout
#
# Made once and reused while its stamp matches the pinned versions below;
# concurrent callers wait on one lock. Needs Debian's python3-venv
# (deploy/setup.sh) and the package registry.
set -euo pipefail
build=${1:?usage: tf_venv.sh BUILD_DIR}
venv="$build/tf-venv"
pins=(tensorflow-cpu==2.18.0 keras==3.6.0 'numpy==2.0.2')
stamp="${pins[*]}"
mkdir -p "$build"
exec 9>"$build/.tf-venv.lock"
flock -w 900 9 || { echo "tf_venv.sh: waited 900 s for $build/.tf-venv.lock" >&2; exit 1; }
if [[ ! -x $venv/bin/python || $(cat "$venv/.mw-stamp" 2>/dev/null) != "$stamp" ]]; then
    echo "tf_venv.sh: creating $venv (${pins[*]})" >&2
    rm -rf "$venv"
    /usr/bin/python3 -m venv "$venv"
    if ! "$venv/bin/pip" install -q --disable-pip-version-check "${pins[@]}" >&2; then
        rm -rf "$venv"
        echo "tf_venv.sh: pip could not install ${pins[*]} (is the package registry reachable?)" >&2
        exit 1
    fi
    echo "$stamp" >"$venv/.mw-stamp"
fi
echo "$venv/bin/python"
