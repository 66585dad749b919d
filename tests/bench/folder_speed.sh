#!/usr/bin/env bash
# Training speed from a JPEG folder against a decoded .npy set of the same images: a
# keras.applications model (weights=None, classes=10) at SIZE x SIZE, batch 32 per replica,
# `mpirun -n 2` x 1 thread, epoch 2 of 2 of STEPS steps (epoch 1 warms up); rounds alternate the
# two so drift hits both alike. The folder's images are decoded and resized as batches are
# assembled (docs/data.md, "Streaming"); the .npy images are memory-mapped. Prints each round,
# the medians in images/s and folder / npy (the target: within 10 %). Both runs must also end
# with the same loss (the same pixels train the same model).
#   folder_speed.sh MWTRAIN [rounds=3] [steps=10] [MODEL:SIZE ...]   (default ResNet50:32
#   ResNet50:96). Needs tests/bench/tf_venv.sh's venv (77 without) and Fashion-MNIST.
set -euo pipefail
mwtrain=$1 rounds=${2:-3} steps=${3:-10}
cells=("${@:4}")
((${#cells[@]})) || cells=(ResNet50:32 ResNet50:96)
src=$(cd "$(dirname "$0")/../.." && pwd)
build=${MW_BUILDDIR:-$(dirname "$(dirname "$(readlink -f "$mwtrain")")")}
if ! tfpy=$(bash "$src/tests/bench/tf_venv.sh" "$build"); then
    echo "folder_speed: no TensorFlow environment (tests/bench/tf_venv.sh failed)" >&2
    exit 77
fi
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh" # the Open MPI environment (tests/openmpi.env)
unset OMP_NUM_THREADS OPENBLAS_NUM_THREADS
export TF_CPP_MIN_LOG_LEVEL=3
work=$(mktemp -d "${TMPDIR:-/tmp}/mwbench-folder-XXXXXX")
trap 'rm -rf "$work"' EXIT
echo "load average $(cut -d ' ' -f 1-3 /proc/loadavg) on $(nproc) CPUs: the numbers mean" \
    "something only on an otherwise idle machine"
declare -A vals loss
for cell in "${cells[@]}"; do
    name=${cell%:*} size=${cell#*:}
    [[ -d $work/d$size ]] || "$tfpy" "$src/tests/bench/jpeg_folder.py" "$work/d$size" "$size" \
        $((64 * steps)) 64 >/dev/null 2>&1
    "$tfpy" "$src/tests/bench/peer_keras_zoo.py" save "$name" "$size" "$work/$name-$size.keras" \
        >/dev/null 2>&1
done
for ((r = 1; r <= rounds; r++)); do
    for cell in "${cells[@]}"; do
        name=${cell%:*} size=${cell#*:}
        for d in npy folder; do
            out=$(mpirun -n 2 "$mwtrain" train --model "$work/$name-$size.keras" \
                --data "$work/d$size/$d" --batch-per-replica 32 --epochs 2 \
                --steps-per-epoch "$steps" --progress none --checkpoint-every-epochs 0 \
                --summary-dir "" --test-examples 32 --checkpoint-dir "$work/ck" --threads 1 2>&1)
            t=$(sed -n 's/^Epoch 2,.*Time: \([0-9.]*\) s.*/\1/p' <<<"$out")
            l=$(sed -n 's/^Epoch 2, Loss: \([0-9.]*\),.*/\1/p' <<<"$out")
            [[ -n $t ]] || { echo "$out" | tail -n 3; exit 1; }
            vals[$cell/$d]+=" $(awk -v t="$t" -v n=$((64 * steps)) 'BEGIN {printf "%.2f", n / t}')"
            loss[$cell/$d]=$l
        done
        echo "round $r, $cell: npy ${vals[$cell/npy]##* }, folder ${vals[$cell/folder]##* } images/s"
    done
done
median() {
    printf '%s\n' "$@" | sort -g |
        awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'
}
printf '\ntraining from a JPEG folder vs a decoded .npy, mpirun -n 2, median of %d rounds\n' "$rounds"
for cell in "${cells[@]}"; do
    a=$(median ${vals[$cell/npy]}) b=$(median ${vals[$cell/folder]})
    printf '%-14s npy %8.1f  folder %8.1f images/s  folder/npy %.3f  (epoch-2 loss %s, %s)\n' \
        "$cell" "$a" "$b" "$(awk -v a="$a" -v b="$b" 'BEGIN {print b / a}')" \
        "${loss[$cell/npy]}" "${loss[$cell/folder]}"
done
