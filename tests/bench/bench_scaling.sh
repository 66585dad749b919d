#!/usr/bin/env bash
# Data-parallel scaling on this machine: 2 ranks x 1 thread against 1 rank x
# 1 thread, the same batch per replica (weak scaling: twice the global batch),
# alternating rounds; prints the median images/s of each and the speed-up
# (goal >= 1.8x on 2 cores, i.e. >= 90% efficiency).
#   bench_scaling.sh MWTRAIN [rounds=3] [steps=150]
set -euo pipefail
mw=$1 rounds=${2:-3} steps=${3:-150}
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh" # the Open MPI environment (tests/openmpi.env)
ips() { sed -n 's/.*Images\/s: \([0-9.]*\).*/\1/p' | tail -n 1; }
one=() two=()
for ((r = 1; r <= rounds; r++)); do
    # epoch 2 of 2 is steady state
    one+=("$(mpiexec -n 1 "$mw" train --epochs 2 --steps-per-epoch "$steps" --threads 1 --progress none --quiet --checkpoint-every-epochs 0 --summary-dir "" | ips)")
    two+=("$(mpiexec -n 2 "$mw" train --epochs 2 --steps-per-epoch "$steps" --threads 1 --progress none --quiet --checkpoint-every-epochs 0 --summary-dir "" | ips)")
    echo "round $r: 1 rank ${one[-1]} images/s, 2 ranks ${two[-1]} images/s"
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
a=$(median "${one[@]}") b=$(median "${two[@]}")
printf 'scaling, batch 64 per replica, 1 thread per rank, median of %d rounds:\n' "$rounds"
printf '  1 rank  %8.0f images/s\n  2 ranks %8.0f images/s\n  speed-up %7.2fx (efficiency %.0f%%)\n' \
    "$a" "$b" "$(awk -v a="$a" -v b="$b" 'BEGIN {print b / a}')" "$(awk -v a="$a" -v b="$b" 'BEGIN {print 50 * b / a}')"
