#!/usr/bin/env bash
# Memory checked before it is used (worker/memory.h): flags that do not fit end in set-up with
# exit 6 and the estimate, never in the kernel's OOM killer (137, which deploy scripts retry).
#   1. outside any cgroup, --batch-per-replica 65536 --micro-batch 65536 --threads 2 (28.5 GiB
#      of activations) exits 6 within seconds without growing (peak RSS well under 1 GB);
#      skipped where the machine has that much available (the run would fit there).
#   2. in a 1 GiB memory cgroup, --batch-per-replica 8192 --micro-batch 8192 exits 6, not 137,
#      naming the estimate and the 1.0 GiB limit;
#   3. a normal small run in the same cgroup still trains (exit 0): the check does not refuse
#      what fits;
#   4. MW_MEMORY_CHECK=off skips the check (the run then meets the limit: no exit 6).
# The cgroup is made with cgroup v2 (/sys/fs/cgroup/mwtrain-test-$$, memory.max) or, on a v1 or
# hybrid system, the v1 memory controller (memory.limit_in_bytes); without either, or without
# the rights to make one, parts 2-4 are skipped (exit 77 with the reason). The cgroup is
# removed on every exit, after the processes in it have ended.
#   test_memory.sh MWTRAIN
set -uo pipefail
mw=$(realpath "$1")
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
unset MW_MEMORY_CHECK
tmp=$(mktemp -d)
cg=""
cleanup() {
    if [[ -n $cg && -d $cg ]]; then
        # the runs were waited for; give the kernel a moment to let go of them
        for _ in $(seq 1 100); do
            [[ -z $(cat "$cg/cgroup.procs" 2>/dev/null) ]] && break
            sleep 0.1
        done
        # anything still in it was started by this test (nothing else joins this cgroup)
        for p in $(cat "$cg/cgroup.procs" 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
        for _ in $(seq 1 100); do
            rmdir "$cg" 2>/dev/null && break
            sleep 0.1
        done
        [[ -d $cg ]] && echo "WARNING: could not remove $cg"
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT
cd "$tmp" || exit 1

pass=0 fail=0
check() { if eval "$1"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $2"; fi; }
quick=(--epochs 1 --steps-per-epoch 1 --progress none --summary-dir '' --checkpoint-every-epochs 0)
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

# --- 1. outside any cgroup --------------------------------------------------------------------
avail_kb=$(awk '/^MemAvailable:/ { print $2 }' /proc/meminfo)
if ((avail_kb > 27 * 1024 * 1024)); then
    echo "part 1 skipped: $((avail_kb / 1024 / 1024)) GiB available, the 28.5 GiB run would fit"
elif [[ ! -x /usr/bin/time ]]; then
    echo "part 1 skipped: /usr/bin/time (GNU time) is not installed to measure the peak RSS"
else
    t0=$(now)
    timeout -s KILL 120 /usr/bin/time -v -o "$tmp/time1" "$mw" train --batch-per-replica 65536 \
        --micro-batch 65536 --threads 2 "${quick[@]}" >"$tmp/out1" 2>"$tmp/err1"
    rc=$?
    took=$(secs "$t0" "$(now)")
    rss_kb=$(awk -F': ' '/Maximum resident set size/ { print $2 }' "$tmp/time1")
    echo "part 1: exit $rc in $took s, peak RSS ${rss_kb:-?} kB"
    grep -v "^\s*$" "$tmp/err1" | head -5
    check '[[ $rc -eq 6 ]]' "65536 x 65536, 2 threads: exit 6 (got $rc)"
    check 'awk -v t="$took" "BEGIN { exit !(t < 20) }"' "exit within 20 s (took $took s)"
    check '[[ -n $rss_kb ]] && ((rss_kb < 500 * 1024))' "peak RSS under 500 MB (got $rss_kb kB)"
    check 'grep -q "this run needs about 28.5 GiB" "$tmp/err1"' "message: the estimate"
    check 'grep -q "activations 28.4 GiB for 2 threads x 32768 examples" "$tmp/err1"' \
        "message: the activations broken down"
    # MemAvailable here, or the limit of the cgroup the test itself runs in
    check 'grep -Eq "it may use \((/proc/meminfo: MemAvailable|cgroup v[12] )" "$tmp/err1"' \
        "message: the source of the limit"
fi

# --- a 1 GiB memory cgroup --------------------------------------------------------------------
skip=""
if (($(id -u) != 0)); then
    skip="not root: cannot make a memory cgroup"
elif [[ -f /sys/fs/cgroup/cgroup.controllers ]]; then
    if ! grep -qw memory /sys/fs/cgroup/cgroup.controllers; then
        skip="cgroup v2 without the memory controller (/sys/fs/cgroup/cgroup.controllers)"
    elif ! mkdir "/sys/fs/cgroup/mwtrain-test-$$" 2>"$tmp/mkdir"; then
        skip="cannot make /sys/fs/cgroup/mwtrain-test-$$: $(cat "$tmp/mkdir")"
    else
        cg=/sys/fs/cgroup/mwtrain-test-$$
        if [[ ! -f $cg/memory.max ]]; then
            skip="the memory controller is not enabled for children of /sys/fs/cgroup"
        else
            echo 1G >"$cg/memory.max"
            echo 0 >"$cg/memory.swap.max" 2>/dev/null
            kind="cgroup v2 memory.max"
        fi
    fi
elif [[ -f /sys/fs/cgroup/memory/memory.limit_in_bytes ]]; then
    if ! mkdir "/sys/fs/cgroup/memory/mwtrain-test-$$" 2>"$tmp/mkdir"; then
        skip="cannot make /sys/fs/cgroup/memory/mwtrain-test-$$: $(cat "$tmp/mkdir")"
    else
        cg=/sys/fs/cgroup/memory/mwtrain-test-$$
        echo 1G >"$cg/memory.limit_in_bytes"
        echo 1G >"$cg/memory.memsw.limit_in_bytes" 2>/dev/null
        kind="cgroup v1 memory.limit_in_bytes"
    fi
else
    skip="no cgroup v2 memory controller and no cgroup v1 memory mount under /sys/fs/cgroup"
fi
if [[ -n $skip ]]; then
    echo "SKIP parts 2-4: $skip"
    ((fail)) && exit 1
    exit 77
fi
echo "cgroup: $cg (1 GiB, $kind)"

# in_cgroup SECONDS OUTFILE ERRFILE mwtrain-args...: run mwtrain inside the cgroup
in_cgroup() {
    local lim=$1 out=$2 err=$3
    shift 3
    timeout -s KILL "$lim" bash -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' _ "$cg" \
        "$mw" "$@" >"$out" 2>"$err"
}

# --- 2. 8192 x 8192 in 1 GiB: exit 6 ----------------------------------------------------------
t0=$(now)
in_cgroup 120 "$tmp/out2" "$tmp/err2" train --batch-per-replica 8192 --micro-batch 8192 \
    "${quick[@]}"
rc=$?
took=$(secs "$t0" "$(now)")
echo "part 2: exit $rc in $took s"
grep -v "^\s*$" "$tmp/err2" | head -5
check '[[ $rc -ne 137 ]]' "not killed by the OOM killer (137)"
check '[[ $rc -eq 6 ]]' "8192 x 8192 in 1 GiB: exit 6 (got $rc)"
check 'awk -v t="$took" "BEGIN { exit !(t < 20) }"' "exit within 20 s (took $took s)"
check 'grep -q "this run needs about [0-9.]* GiB of memory on this rank" "$tmp/err2"' \
    "message: the estimate"
check 'grep -q "activations [0-9.]* GiB for [0-9]* threads\? x [0-9]* examples" "$tmp/err2"' \
    "message: the activations broken down"
check 'grep -q "$kind of /mwtrain-test-$$: limit 1.0 GiB" "$tmp/err2"' \
    "message: the 1.0 GiB limit and its source"
check 'grep -q -- "--micro-batch" "$tmp/err2"' "message: what to change"
check '(($(grep -c "this run needs about" "$tmp/err2") == 1))' "one message"

# --- 3. a normal small run in 1 GiB trains ----------------------------------------------------
t0=$(now)
in_cgroup 300 "$tmp/out3" "$tmp/err3" train --epochs 1 --steps-per-epoch 20 --test-examples 1000 \
    --progress none --summary-dir '' --checkpoint-every-epochs 0 --verbose
rc=$?
echo "part 3: exit $rc in $(secs "$t0" "$(now)") s"
grep "memory:" "$tmp/err3"
check '[[ $rc -eq 0 ]]' "a small run in 1 GiB trains (got $rc: $(grep error "$tmp/err3"))"
check 'grep -q "^Epoch 1, Loss" "$tmp/out3"' "it reports the epoch"
check 'grep -q "memory: about .* per rank (activations .*available to it ($kind" "$tmp/err3"' \
    "--verbose prints the estimate and the limit"

# --- 4. MW_MEMORY_CHECK=off skips the check ---------------------------------------------------
MW_MEMORY_CHECK=off in_cgroup 60 "$tmp/out4" "$tmp/err4" train --batch-per-replica 8192 \
    --micro-batch 8192 "${quick[@]}"
rc=$?
echo "part 4 (MW_MEMORY_CHECK=off): exit $rc"
check '[[ $rc -ne 6 ]] && ! grep -q "this run needs about" "$tmp/err4"' \
    "MW_MEMORY_CHECK=off: no check (got $rc)"

echo "$pass passed, $fail failed"
((fail == 0))
