#!/usr/bin/env bash
# README command 1: set up, build, and train the tutorial CNN on Fashion-MNIST
# on this machine. Extra arguments go to `mwtrain train` (e.g. --epochs 2).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
bash "$MW_ROOT/deploy/setup.sh"
mw_build
exec "$MW_BUILD/worker/mwtrain" train "$@"
