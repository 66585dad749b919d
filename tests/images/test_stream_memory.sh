#!/usr/bin/env bash
# Streaming keeps memory bounded: an image folder of JPEG files more than 4 times the memory
# limit of a cgroup trains an epoch inside it (exit 0, nothing OOM-killed), with mwtrain's peak
# RSS well under the limit. The files are 512x512 RGB at quality 100 (make_jpegs: a class
# pattern plus noise, about 360 KB each), resized to 32x32 as batches are assembled. The control
# shows the limit is real: a process that allocates 1.5 times the limit in the same cgroup is
# killed. Skips (77) where no memory cgroup can be made (not root, no memory controller).
#   test_stream_memory.sh MWTRAIN MAKE_JPEGS [LIMIT_MIB=128]
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
mw=$(realpath "$1") make=$(realpath "$2") limit=${3:-128}
work=$(mktemp -d "${TMPDIR:-/tmp}/mwtest-stream-XXXXXX")
cleanup() {
    mw_cgroup_remove
    rm -rf "$work"
}
trap cleanup EXIT
if ! mw_cgroup_make "${limit}M"; then
    echo "SKIP: $mw_cg_skip"
    exit 77
fi
per=$((limit * 4 * 1024 / 360 / 10 + 10)) # images per class for 4 x the limit, and some
bytes=$("$make" "$work/jpegs" 10 "$per" 512 512 100 7) || exit 1
mib=$((bytes / 1024 / 1024))
echo "data: $((10 * per)) training and $((10 * (per / 8 + 1))) test JPEG files, $mib MiB;" \
    "$mw_cg_kind $limit MiB ($(awk -v a="$mib" -v b="$limit" 'BEGIN {printf "%.1f", a / b}') x)"
check "((mib >= 4 * limit))" "the data ($mib MiB) are at least 4 x the limit ($limit MiB)"
sync
echo 3 >/proc/sys/vm/drop_caches 2>/dev/null # the files are read from disk, not left cached
rc=0
"${mw_cg_exec[@]}" /usr/bin/time -f "%M" -o "$work/rss" "$mw" train --data "$work/jpegs" \
    --image-size 32x32 --epochs 1 --batch-per-replica 32 --threads 1 --progress none --summary-dir "" \
    --checkpoint-dir "$work/ck" >"$work/out" 2>&1 || rc=$?
rss_kb=$(tail -n 1 "$work/rss")
peak=$(cat "$mw_cg/memory.peak" 2>/dev/null || cat "$mw_cg/memory.max_usage_in_bytes" 2>/dev/null)
echo "train: exit $rc, peak RSS $((rss_kb / 1024)) MiB, the cgroup's peak (page cache" \
    "included) $((${peak:-0} / 1024 / 1024)) MiB"
grep -E "^Epoch|error" "$work/out"
check "((rc == 0))" "an epoch over $mib MiB in a $limit MiB cgroup: exit $rc (137: OOM-killed)"
check "grep -q '^Epoch 1,' $work/out" "the epoch's line"
check "((rss_kb < limit * 1024 * 3 / 4))" "peak RSS $rss_kb kB under 3/4 of the limit"
rc=0
"${mw_cg_exec[@]}" python3 -c "b = bytearray($((limit * 3 / 2)) << 20); b[::4096] = b'x' * len(b[::4096])" \
    >/dev/null 2>&1 || rc=$?
check "((rc == 137))" "control: allocating 1.5 x the limit in the cgroup is killed (exit $rc)"
finish stream-memory
