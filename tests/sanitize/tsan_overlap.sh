#!/usr/bin/env bash
# The overlapped all-reduce (worker/replicas/overlap.c: a communication thread all-reducing
# buckets while the backward runs) under ThreadSanitizer: mwtrain built with
# -Db_sanitize=thread (no CUDA) in BUILD_DIR (made when missing), then 4 Adam steps of the
# regularized Transformer LM with --overlap-allreduce on and 0.02 MiB buckets on three layouts:
# 2 ranks, the ring of 4 ranks, and the hierarchical all-reduce of 2 nodes x 2 (a fake
# TF_CONFIG). Each run must exit 0 with no report. One thread per rank: GCC's libgomp is not
# built with TSan, so its fork and barriers hide the order between OpenMP's threads and every
# parallel loop would be reported (about 50 false races per step with --threads 2); the order
# that matters here, the main thread against the communication thread, is plain pthreads and
# MPI. Open MPI's TCP transport locks two of its own mutexes in both orders at start and at
# finalize (mca_btl_tcp_add_procs / mca_btl_tcp_proc_remove): that report is suppressed
# (tsan.supp). Slow to build (a few minutes); run by hand:
#   tests/sanitize/tsan_overlap.sh [BUILD_DIR]      (default: build-tsan)
set -euo pipefail
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${1:-$src/build-tsan}
[[ -f $build/build.ninja ]] ||
    meson setup "$build" "$src" -Db_sanitize=thread -Dcuda=disabled -Dbuildtype=debugoptimized
ninja -C "$build" worker/mwtrain
. "$src/tests/lib.sh" # the Open MPI environment (tests/openmpi.env)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export TSAN_OPTIONS="halt_on_error=0 report_signal_unsafe=0 suppressions=$src/tests/sanitize/tsan.supp log_path=$tmp/tsan"
fake2x2='{"cluster":{"worker":["node-a:2222","node-a:2223","node-b:2222","node-b:2223"]},"task":{"type":"worker","index":0}}'
fail=0
for layout in 2-ranks ring-4 nodes-2x2; do
    case $layout in
    2-ranks) pre=(env -u TF_CONFIG) n=2 extra=() ;;
    ring-4) pre=(env -u TF_CONFIG) n=4 extra=(--allreduce ring) ;;
    nodes-2x2) pre=(env TF_CONFIG="$fake2x2") n=4 extra=() ;;
    esac
    rm -f "$tmp"/tsan.*
    rc=0
    "${pre[@]}" timeout 900 mpiexec -n "$n" "$build/worker/mwtrain" train --epochs 1 \
        --steps-per-epoch 4 --progress none --collective-timeout 300 --checkpoint-every-epochs 0 \
        --summary-dir "" --test-examples 32 --micro-batch 4 --batch-per-replica $((32 / n)) \
        --threads 1 --overlap-allreduce on --bucket-mb 0.02 "${extra[@]}" \
        --model "$src/tests/data/keras/graph/overlap_lm.json" \
        --data /usr/share/common-licenses/GPL-3 --sequence-length 32 >"$tmp/out" 2>&1 || rc=$?
    reports=$(cat "$tmp"/tsan.* 2>/dev/null | grep -c 'WARNING: ThreadSanitizer' || true)
    buckets=$(grep -o 'overlapped all-reduce: [0-9]* bucket(s)' "$tmp/out" | head -n 1 || true)
    if ((rc == 0 && reports == 0)) && [[ -n $buckets ]]; then
        echo "ok    $layout: exit 0, no report ($buckets)"
    else
        echo "FAIL  $layout: exit $rc, $reports report(s), '${buckets:-no overlap line}'"
        cat "$tmp"/tsan.* 2>/dev/null | head -n 60
        tail -n 5 "$tmp/out"
        fail=1
    fi
done
exit $fail
