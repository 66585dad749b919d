#!/usr/bin/env bash
# extract_commands.py's rule that every multi-node launch in deploy/ reads
# mpirun/mca-params.conf: an mpirun command without `--tune .../mca-params.conf` and an srun
# script without OMPI_MCA_mca_base_param_files are errors naming the file and line; with them
# the local run keeps `--tune DEPLOY/mpirun/mca-params.conf`; deploy/local/ (one machine) is
# exempt.
#   test_tune_rule.sh
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
d=$tmp/deploy
mkdir -p "$d/mpirun" "$d/slurm" "$d/local"
cat >"$d/mpirun/run.sh" <<'X'
# mwtrain-command
mpirun --hostfile h -n 8 mwtrain train
# mwtrain-command
mpirun --tune "$here/mca-params.conf" --hostfile h -n 8 mwtrain train
X
cat >"$d/slurm/a.sbatch" <<'X'
# mwtrain-command
srun --mpi=pmix mwtrain train
X
cat >"$d/slurm/b.sbatch" <<'X'
export OMPI_MCA_mca_base_param_files=${MCA_PARAMS:-$SLURM_SUBMIT_DIR/deploy/mpirun/mca-params.conf}
# mwtrain-command
srun --mpi=pmix mwtrain train
X
cat >"$d/local/train.sh" <<'X'
# mwtrain-command
mpirun -n 2 mwtrain train
X
python3 "$here/extract_commands.py" "$d" /bin/mwtrain "$tmp/run" /data "$tmp/hf" >"$tmp/out"
cat "$tmp/out"
expect() { # PATTERN WHAT
    local ok=false
    grep -qE -- "$1" "$tmp/out" && ok=true
    check "$ok" "$2"
}
expect $'^deploy/mpirun/run.sh:2\tERROR\tmpirun without --tune \\.\\.\\./mca-params\\.conf' \
    "mpirun without --tune is an error naming run.sh:2"
expect $'^deploy/mpirun/run.sh:4\tmpirun --tune '"$d"'/mpirun/mca-params\.conf -n 2' \
    "mpirun with --tune keeps it, pointing at DEPLOY/mpirun/mca-params.conf"
expect $'^deploy/slurm/a.sbatch:2\tERROR\tsrun launch without OMPI_MCA_mca_base_param_files' \
    "srun without the variable is an error naming a.sbatch:2"
expect $'^deploy/slurm/b.sbatch:3\tmpirun -n 2' "srun with the variable runs"
expect $'^deploy/local/train.sh:2\tmpirun -n 2' "deploy/local/ (one machine) is exempt"
finish
