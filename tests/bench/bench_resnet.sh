#!/usr/bin/env bash
# ResNet-20 training throughput, mwtrain against Keras 3 (JAX, CPU) on the same machine: the same
# .keras model (Keras builds and saves it), global batch, optimizer (Adam 1e-3) and cores, measured
# side by side in one run. Rounds alternate the two so drift hits both alike; prints the medians and
# the ratio. mwtrain runs as `mpirun -n 2` with one thread per rank (the layout of the accuracy run
# in docs/keras.md) and as one rank with 2 threads; Keras in one process, whose XLA thread pool
# takes every core. One more mwtrain row: the same model with every BatchNormalization synchronized
# (statistics over the global batch: 2 all-reduces per BN layer and step), as `mpirun -n 2`, for the
# cost of synchronizing against the unsynchronized row.
#   bench_resnet.sh MWTRAIN [rounds=3] [steps=30]   (needs tests/keras/venv.sh's venv; 77 without)
set -euo pipefail
mwtrain=$1 rounds=${2:-3} steps=${3:-30}
src=$(cd "$(dirname "$0")/../.." && pwd)
build=${MW_BUILDDIR:-$(dirname "$(dirname "$(readlink -f "$mwtrain")")")}
if ! py=$(bash "$src/tests/keras/venv.sh" "$build"); then
    echo "bench_resnet: no Keras environment (tests/keras/venv.sh failed)" >&2
    exit 77
fi
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh" # the Open MPI environment (tests/openmpi.env)
export KERAS_BACKEND=jax JAX_PLATFORMS=cpu
unset OMP_NUM_THREADS OPENBLAS_NUM_THREADS
work=$(mktemp -d "${TMPDIR:-/tmp}/mwbench-resnet-XXXXXX")
trap 'rm -rf "$work"' EXIT
"$py" "$src/tests/bench/peer_keras_resnet.py" save "$work/resnet20.keras"
"$py" "$src/tests/bench/peer_keras_resnet.py" save "$work/resnet20-sync.keras" --synchronized
flags=(--model "$work/resnet20.keras" --batch-per-replica 64 --epochs 2 --steps-per-epoch "$steps"
       --progress none --quiet --checkpoint-every-epochs 0 --summary-dir "" --test-examples 128
       --checkpoint-dir "$work/ck")
sflags=("${flags[@]}")
sflags[1]=$work/resnet20-sync.keras sflags[-1]=$work/ck-sync
ips() { sed -n 's/^Epoch 2,.*Images\/s: \([0-9.]*\).*/\1/p' | tail -n 1; }
two=() one=() ks=() syn=()
for ((r = 1; r <= rounds; r++)); do
    # epoch 2 of 2 is steady state (epoch 1 includes the first touch of every buffer)
    two+=("$(mpirun --oversubscribe -n 2 "$mwtrain" train "${flags[@]}" --threads 1 | ips)")
    one+=("$("$mwtrain" train "${flags[@]}" --batch-per-replica 128 --threads 2 | ips)")
    syn+=("$(mpirun --oversubscribe -n 2 "$mwtrain" train "${sflags[@]}" --threads 1 | ips)")
    ks+=("$("$py" "$src/tests/bench/peer_keras_resnet.py" time "$work/resnet20.keras" \
        --batch 128 --steps "$steps" | sed -n 's/.*images_per_sec=\([0-9.]*\).*/\1/p')")
    echo "round $r: mwtrain 2 ranks x 1 thread ${two[-1]} (synchronized BN ${syn[-1]})," \
        "1 rank x 2 threads ${one[-1]}, keras ${ks[-1]} images/s"
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
m2=$(median "${two[@]}") m1=$(median "${one[@]}") k=$(median "${ks[@]}") ms=$(median "${syn[@]}")
printf 'ResNet-20 train throughput, global batch 128, %d steps, median of %d rounds:\n' "$steps" "$rounds"
printf '  mwtrain, mpirun -n 2 x 1 thread  %7.0f images/s  %.2fx Keras\n' "$m2" \
    "$(awk -v a="$m2" -v b="$k" 'BEGIN {print a / b}')"
printf '  mwtrain, 1 rank x 2 threads      %7.0f images/s  %.2fx Keras\n' "$m1" \
    "$(awk -v a="$m1" -v b="$k" 'BEGIN {print a / b}')"
printf '  mwtrain, mpirun -n 2, sync BN     %7.0f images/s  %.2fx Keras, %.2fx unsynchronized\n' \
    "$ms" "$(awk -v a="$ms" -v b="$k" 'BEGIN {print a / b}')" \
    "$(awk -v a="$ms" -v b="$m2" 'BEGIN {print a / b}')"
printf '  keras 3 (jax cpu), 1 process     %7.0f images/s\n' "$k"
