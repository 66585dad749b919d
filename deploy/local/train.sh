#!/usr/bin/env bash
# README command 1: set up, build, and train the tutorial CNN on Fashion-MNIST
# on this machine with 2 ranks (the smallest real data-parallel job: one global
# batch of 2 x 64, gradients all-reduced through shared memory). Extra
# arguments go to `mwtrain train` (e.g. --epochs 2); MW_RANKS=N changes the rank
# count.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
bash "$MW_ROOT/deploy/setup.sh"
mw_build
# --oversubscribe: also on a machine with fewer cores than ranks
# mwtrain-command
exec mpirun --oversubscribe -n "${MW_RANKS:-2}" "$MW_BUILD/worker/mwtrain" train "$@"
