#!/usr/bin/env bash
# A few training steps, an evaluation, a checkpoint, a resume and an export
# under valgrind memcheck: no invalid reads or writes, no uninitialized values
# used, nothing of ours definitely lost. With a second argument, the hostdev module
# (tests/cuda), the GPU training loop does the same on two fake devices, opened by the same
# binary through MW_CUDA_MODULE. Slow (a few minutes); run by hand:
#   tests/sanitize/valgrind.sh build/worker/mwtrain [build/tests/cuda/mwtrain-hostdev.so]
set -euo pipefail
mw=$1 hdmod=${2:-}
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh" # the Open MPI environment (tests/openmpi.env)
# OpenBLAS for the matrix products: oneDNN's sgemm runs JIT-generated AVX2 code that reads a
# vector past its own packing buffers, which memcheck reports as invalid reads in anonymous
# code (36 of them in a GPU-path eval on AMD EPYC; none with OpenBLAS, same calls from us).
export MW_GEMM=openblas
vg=(valgrind --error-exitcode=9 --leak-check=full --errors-for-leak-kinds=definite
    --suppressions=/usr/share/openmpi/openmpi-valgrind.supp --suppressions="$here/valgrind.supp"
    --quiet)
quick=(--steps-per-epoch 3 --test-examples 64 --threads 1 --progress none
       --checkpoint-dir "$tmp/ck" --summary-dir "$tmp/logs")
"${vg[@]}" "$mw" train --epochs 1 "${quick[@]}"
"${vg[@]}" "$mw" train --epochs 2 --resume "${quick[@]}"
"${vg[@]}" "$mw" eval --checkpoint-dir "$tmp/ck" --test-examples 64 --threads 1
"${vg[@]}" "$mw" export --checkpoint-dir "$tmp/ck" --output "$tmp/m.safetensors"
# an image folder of JPEG files (tests/images/make_jpegs, beside mwtrain in the build), decoded
# as batches are assembled, by the decoding pool, and scanned by --skip-bad-examples (one bad)
mj=$(dirname "$(readlink -f "$mw")")/../tests/images/make_jpegs
if [[ -x $mj ]]; then
    "$mj" "$tmp/jpegs" 2 12 40 48 90 1 >/dev/null
    echo "not an image" >"$tmp/jpegs/train/c1/zz.jpg"
    "${vg[@]}" "$mw" train --epochs 1 --data "$tmp/jpegs" --image-size 24x20 --threads 1 \
        --batch-per-replica 8 --decode-threads 2 --skip-bad-examples --progress none \
        --checkpoint-dir "$tmp/jk" --summary-dir ""
fi
if [[ -n $hdmod ]]; then
    export MW_CUDA_MODULE=$hdmod
    hd=$mw
    gpu=(--device gpu --steps-per-epoch 3 --test-examples 64 --batch-per-replica 16
         --progress none --checkpoint-dir "$tmp/gk" --summary-dir "$tmp/glogs")
    MW_HOSTDEV_GPUS=2 "${vg[@]}" "$hd" train --epochs 1 "${gpu[@]}"
    MW_HOSTDEV_GPUS=2 "${vg[@]}" "$hd" train --epochs 2 --resume "${gpu[@]}"
    MW_HOSTDEV_GPUS=2 "${vg[@]}" "$hd" eval --device gpu --checkpoint-dir "$tmp/gk" --test-examples 64
fi
echo "valgrind: clean"
