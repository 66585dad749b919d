#!/usr/bin/env bash
# Launch mwtrain with mpirun on the machines of an Open MPI hostfile, one rank per slot (per
# GPU). Passes --hostfile explicitly: Open MPI 5 ignores the OMPI_MCA_orte_* variables
# (orte_default_hostfile, ...) that older set-ups and some operators export. Always resumes
# from the last checkpoint, so re-running the same command after a failure continues the job.
#   deploy/mpirun/run.sh HOSTFILE [mwtrain train flags...]
# Environment:
#   MWTRAIN   the binary, the same path on every host (default: mwtrain on PATH)
#   NP        ranks (default: every slot of HOSTFILE, counted by `mwtrain tf-config`)
#   CKPT_DIR  checkpoints, on the first host of HOSTFILE where the chief runs (default
#             ./mwtrain-ckpt); summaries go to CKPT_DIR/logs
#   NCCL_SOCKET_IFNAME, NCCL_IB_DISABLE, NCCL_DEBUG, MW_LOG: passed to every rank when set
set -euo pipefail
hostfile=${1:?usage: run.sh HOSTFILE [mwtrain train flags...]}
shift
MWTRAIN=${MWTRAIN:-mwtrain}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# Count the slots with mwtrain's own hostfile reader: a bad hostfile fails here with a message
# naming the line, before any rank starts.
np=${NP:-$("$MWTRAIN" tf-config --hostfile "$hostfile" | wc -l)}
ckpt=${CKPT_DIR:-$PWD/mwtrain-ckpt}
exports=()
for v in NCCL_SOCKET_IFNAME NCCL_IB_DISABLE NCCL_DEBUG MW_LOG; do
    if [[ -n ${!v:-} ]]; then exports+=(-x "$v"); fi
done
# --bind-to none: mwtrain runs --threads compute threads per rank; the default binding (one
# core per rank for np <= 2, else one socket) would squeeze them together. See README.md.
# --tune: Open MPI's settings to fail fast when a node is lost (mca-params.conf beside this
# script says why, line by line).
# mwtrain-command
exec mpirun --tune "$here/mca-params.conf" --hostfile "$hostfile" -n "$np" --map-by slot \
    --bind-to none "${exports[@]}" \
    "$MWTRAIN" train --resume --checkpoint-dir "$ckpt" --summary-dir "$ckpt/logs" "$@"
