#!/usr/bin/env bash
# A memory-mapped .npy, and an uncompressed .npz, do not become resident:
# tests/bench/bench_mmap.sh at CI size, a 400 MB x_train.npy (130000 32x32x3 uint8 images), then
# the same arrays as np.savez's stored .npz, each trained 20 steps by 2 ranks; each rank's peak
# RSS must stay under 150 MiB, well below the file (the program, MPI, BLAS and the model take
# about 80 MiB; a copy of the data would add 400).
#   test_data_mmap.sh MWTRAIN
src=${MW_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
bash "$src/tests/bench/bench_mmap.sh" "$1" 130000 20 150 npy || exit
exec bash "$src/tests/bench/bench_mmap.sh" "$1" 130000 20 150 npz
