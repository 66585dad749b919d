#!/usr/bin/env bash
# Memory that does not grow with the data set: generate a directory of .npy files
# whose x_train.npy holds EXAMPLES 32x32x3 uint8 images (default 1.3 M: 4.0 GB), or with FORMAT
# npz the same arrays as an uncompressed .npz (np.savez's layout: stored members, zip64), train
# STEPS steps (default 200) with 2 ranks on it, and print each rank's peak RSS (GNU time). The
# images are memory-mapped, never copied: a rank's resident memory holds the program, the model and
# the pages of the examples it assembled, not the file. Fails when a rank's peak RSS exceeds
# MAX_RSS_MB (default 300). Checks the free space first (the file + 10 %) and removes everything
# on any exit.
#   tests/bench/bench_mmap.sh MWTRAIN [EXAMPLES] [STEPS] [MAX_RSS_MB] [npy|npz]
# TMPDIR picks the file system; tests/mpi/test_data_mmap.sh runs it at 400 MB in CI.
set -uo pipefail
mw=$(realpath "$1")
examples=${2:-1300000} steps=${3:-200} max_rss_mb=${4:-300} format=${5:-npy}
py=/usr/bin/python3
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh" # the Open MPI environment (tests/openmpi.env)
if ! "$py" -c 'import numpy' 2>/dev/null; then
    echo "skip: $py has no numpy (Debian package python3-numpy)"
    exit 77
fi
if [[ ! -x /usr/bin/time ]]; then
    echo "skip: GNU time (/usr/bin/time) is not installed to measure the peak RSS"
    exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
nbytes=$((examples * 3072))
need_kb=$((nbytes / 1024 * 11 / 10 + 65536))
free_kb=$(df -Pk "$tmp" | awk 'NR == 2 { print $4 }')
if ((free_kb < need_kb)); then
    echo "skip: $((free_kb / 1024)) MiB free in $tmp, the data need $((need_kb / 1024)) MiB"
    exit 77
fi

t0=$(date +%s.%N)
"$py" - "$tmp/data" "$examples" <<'EOF'
import os, sys
import numpy as np
out, n = sys.argv[1], int(sys.argv[2])
os.makedirs(out)
x = np.lib.format.open_memmap(os.path.join(out, "x_train.npy"), "w+", np.uint8, (n, 32, 32, 3))
r = np.random.default_rng(0)
base = r.integers(0, 256, (4096, 32, 32, 3), dtype=np.uint8)
for i in range(0, n, 4096):  # real bytes on disk, not a sparse file
    k = min(4096, n - i)
    x[i:i + k] = base[:k] ^ np.uint8(i // 4096 % 256)
x.flush()
del x
np.save(os.path.join(out, "y_train.npy"), r.integers(0, 10, n, dtype=np.uint8))
np.save(os.path.join(out, "x_test.npy"), base[:1000])
np.save(os.path.join(out, "y_test.npy"), r.integers(0, 10, 1000, dtype=np.uint8))
EOF
data=$tmp/data
if [[ $format == npz ]]; then # move the members into the archive one by one: one copy on disk
    "$py" - "$tmp/data" "$tmp/data.npz" <<'EOF'
import os, sys, zipfile
d, out = sys.argv[1:3]
with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED, allowZip64=True) as z:
    for k in ("x_train", "y_train", "x_test", "y_test"):
        with open(os.path.join(d, k + ".npy"), "rb") as src, \
                z.open(k + ".npy", "w", force_zip64=True) as dst:  # as np.savez writes them
            while chunk := src.read(1 << 24):
                dst.write(chunk)
        os.remove(os.path.join(d, k + ".npy"))
EOF
    data=$tmp/data.npz
fi
gen=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
if [[ $format == npz ]]; then
    size=$(stat -c %s "$data") what="data.npz (stored members)"
else
    size=$(stat -c %s "$data/x_train.npy") what=x_train.npy
fi
echo "$what: $examples images of 32x32x3 uint8, $((size / 1024 / 1024)) MiB (written in ${gen} s)"

t0=$(date +%s.%N)
timeout 1800 mpiexec -n 2 bash -c '/usr/bin/time -v -o "$0.$OMPI_COMM_WORLD_RANK" "$@"' \
    "$tmp/time" "$mw" train --data "$data" --epochs 1 --steps-per-epoch "$steps" \
    --batch-per-replica 64 --threads 1 --progress none --summary-dir "" \
    --checkpoint-every-epochs 0 --test-examples 1000 --collective-timeout 600 >"$tmp/out" 2>&1
rc=$?
took=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
if ((rc != 0)); then
    echo "FAIL: training exited $rc:"
    tail -n 5 "$tmp/out"
    exit 1
fi
grep '^Epoch' "$tmp/out"
echo "2 ranks, $steps steps of global batch 128, ${took} s"
worst=0
for r in 0 1; do
    kb=$(awk -F': ' '/Maximum resident set size/ { print $2 }' "$tmp/time.$r")
    echo "rank $r: peak RSS $((kb / 1024)) MiB ($(awk -v k="$kb" -v s="$size" \
        'BEGIN { printf "%.1f", 100 * k * 1024 / s }') % of the file)"
    ((kb > worst)) && worst=$kb
done
if ((worst > max_rss_mb * 1024)); then
    echo "FAIL: peak RSS $((worst / 1024)) MiB above the bound of $max_rss_mb MiB"
    exit 1
fi
echo "peak RSS within $max_rss_mb MiB per rank"
