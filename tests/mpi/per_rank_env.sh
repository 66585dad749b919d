#!/bin/sh
# Per-rank TF_CONFIG, as one pod per task would have it (Kubernetes): run "$@" with TF_CONFIG
# set from DIR/rank<OMPI_COMM_WORLD_RANK>.json, or unset when that file does not exist.
#
#   mpiexec -n 4 sh per_rank_env.sh DIR PROGRAM [ARGS...]
#
# exec keeps the pid, so mpiexec and the tests see the program itself.
dir=$1
shift
f=$dir/rank${OMPI_COMM_WORLD_RANK:?not started by Open MPI}.json
if [ -f "$f" ]; then
    TF_CONFIG=$(cat "$f")
    export TF_CONFIG
else
    unset TF_CONFIG
fi
exec "$@"
