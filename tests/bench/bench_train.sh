#!/usr/bin/env bash
# Training throughput, mwtrain against PyTorch 1.13 on the same machine, same
# model, batch, optimizer and thread count, measured side by side in one run:
# rounds alternate the two so drift hits both alike; prints the medians and
# the ratio.
#   bench_train.sh MWTRAIN PEER_TORCH_PY [threads=2] [rounds=3] [steps=200]
set -euo pipefail
mwtrain=$1 peer=$2 threads=${3:-2} rounds=${4:-3} steps=${5:-200}
py=/usr/bin/python3
if ! $py -c 'import torch' 2>/dev/null; then
    echo "bench_train: PyTorch is not installed for $py (run deploy/setup.sh --peer)" >&2
    exit 77
fi
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh" # the Open MPI environment (tests/openmpi.env)
unset OPENBLAS_NUM_THREADS OMP_NUM_THREADS
mw=() pt=()
for ((r = 1; r <= rounds; r++)); do
    # epoch 2 of 2 is steady state (epoch 1 includes warm-up and page faults)
    line=$("$mwtrain" train --epochs 2 --steps-per-epoch "$steps" --threads "$threads" \
        --progress none --quiet --checkpoint-every-epochs 0 --summary-dir "" | tail -n 1)
    v=$(sed -n 's/.*Images\/s: \([0-9.]*\).*/\1/p' <<<"$line")
    mw+=("$v")
    v=$($py "$peer" --threads "$threads" --steps "$steps" | sed -n 's/.*images_per_sec=\([0-9.]*\).*/\1/p')
    pt+=("$v")
    echo "round $r: mwtrain ${mw[-1]} images/s, torch ${pt[-1]} images/s"
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
m=$(median "${mw[@]}") p=$(median "${pt[@]}")
printf 'train throughput, batch 64, %d thread(s), median of %d rounds:\n' "$threads" "$rounds"
printf '  mwtrain %8.0f images/s\n  pytorch %8.0f images/s\n  ratio   %8.2fx\n' "$m" "$p" \
    "$(awk -v a="$m" -v b="$p" 'BEGIN {print a / b}')"
