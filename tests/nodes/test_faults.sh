#!/usr/bin/env bash
# The faults of real clusters, on 2 nodes x 2 ranks in network namespaces (lib.sh), training
# over TCP with --collective-timeout 20 and deploy/mpirun/mca-params.conf (Open MPI's
# keepalive finds a lost daemon within 11 s: well below the timeout, as that file says). One
# fault per run, injected once the checkpoint at step 50 exists:
#   partition   node2's link goes down (in the bridge's namespace) mid-step
#   kill-node   SIGKILL to every process of node2 at once (its daemon and both ranks)
#   stop-node   SIGSTOP to both ranks of node2 (their daemon still answers)
#   chief-lost  node1's link goes down: the chief and rank 1 are cut off from everything
#   mpirun      SIGKILL to mpirun in the launcher
#   daemon-stopped  SIGSTOP to node2's Open MPI daemon (orted), SIGKILL to rank 1 on node1: the
#               ranks on node2 time out and call MPI_Abort, which cannot end them through a
#               stopped daemon; mwtrain's abort grace must end them (within 180 s) while the
#               daemon is still stopped. Not in the meson suite: the grace works (each run
#               prints "MPI_Abort did not end this process within 10 s"), but a rank can spend
#               minutes inside one MPI call before its collective deadline is even checked
#               ("waited 189 s ... (--collective-timeout 20)": Open MPI's progress blocks with
#               the daemon stopped and a peer dead), so the bound does not hold; seen 62-189 s. Then the daemon is continued and the
#               job must end as the others do (this fault alone cannot end before that: no
#               keepalive finds a stopped process whose kernel still answers)
# Each must end with every process in every namespace gone within the timeout + 30 s (the time
# is printed), mpirun's exit status >= 128 (worth a restart: mwtrain's 129-131, 128+signal,
# or Open MPI's 205 for a lost daemon), no process left in any namespace, and then a --resume
# run on the repaired network must finish with weights bitwise equal to an uninterrupted
# 2 x 2 run's (computed once per build and binary, cached next to CMP_WEIGHTS).
#   test_faults.sh MWTRAIN CMP_WEIGHTS FAULT
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
mw=$(realpath "$1") cmp=$(realpath "$2") fault=$3
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/lib.sh"
timeout_s=20
case $fault in partition | kill-node | stop-node | chief-lost | mpirun | daemon-stopped) ;;
*)
    echo "test_faults.sh: unknown fault '$fault'" >&2
    exit 2
    ;;
esac
nodes_up 2
flags=(train --model "$here/../data/keras/mlp_k3.json" --epochs 2 --steps-per-epoch 60
       --batch-per-replica 16 --checkpoint-every-steps 25 --checkpoint-every-epochs 1
       --test-examples 200 --summary-dir "" --progress none --threads 1
       --collective-timeout "$timeout_s" --checkpoint-dir "$MWN_DISK/ckpt")

# 1. the uninterrupted run, once per binary, flags and oneDNN ISA cap (its weights do not depend
# on the fault, but oneDNN's kernels, which sum in another order, do)
key=$( (sha1sum "$mw" | cut -c1-12; echo "${flags[*]}" | sed "s#$MWN_ROOT##g"
        echo "${ONEDNN_MAX_CPU_ISA:-}") | sha1sum | cut -c1-12)
ref=$(dirname "$cmp")/nodes-ref-$key.bin
exec 9>"$ref.lock"
flock 9
if [[ ! -s $ref ]]; then
    mwn_mpirun 2 2 "$mw" "${flags[@]}" --checkpoint-dir "$MWN_DISK/ref" \
        --dump-weights "$MWN_DISK/ref.bin" >"$MWN_ROOT/ref.out" 2>&1
    rc=$?
    check '[[ $rc -eq 0 && -s $MWN_ROOT/disk/node1/ref.bin ]]' \
        "uninterrupted run (exit $rc): $(tail -n 3 "$MWN_ROOT/ref.out")"
    [[ $rc -eq 0 ]] && cp "$MWN_ROOT/disk/node1/ref.bin" "$ref.tmp" && mv "$ref.tmp" "$ref"
fi
flock -u 9

# 2. the run with the fault
mwn_mpirun 2 2 "$mw" "${flags[@]}" >"$MWN_ROOT/fault.out" 2>&1 &
job=$!
ckpt=$MWN_ROOT/disk/node1/ckpt
for _ in $(seq 1 600); do
    [[ -f $ckpt/ckpt-2 ]] && break
    sleep 0.05
done
check '[[ -f $ckpt/ckpt-2 ]]' "the checkpoint at step 50 appeared on the chief's node"
ranks2=$(for p in $(node_pids 2); do grep -q mwtrain "/proc/$p/cmdline" 2>/dev/null && echo "$p"; done)
t0=$(date +%s.%N)
case $fault in
partition) ip -n "$MWN_BR" link set b2 down ;;
kill-node) kill -9 $(node_pids 2) ;;
stop-node) kill -STOP $ranks2 ;;
chief-lost) ip -n "$MWN_BR" link set b1 down ;;
mpirun) kill -9 $(for p in $(node_pids 0); do
    grep -q '^mpirun' "/proc/$p/cmdline" 2>/dev/null && echo "$p"; done) ;;
daemon-stopped)
    orted2=$(for p in $(node_pids 2); do grep -q '^orted' "/proc/$p/cmdline" 2>/dev/null && echo "$p"; done)
    rank1=$(for p in $(node_pids 1); do
        tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx OMPI_COMM_WORLD_RANK=1 && echo "$p"
    done)
    kill -STOP $orted2
    kill -9 $rank1
    # node2's ranks must end while their daemon is still stopped. Bound: 180 s. Measured on a
    # loaded 2-core machine: 62-109 s, of which the grace is 10 s and the rank's own collective
    # timeout 20 s; the rest passes before the rank starts its last wait, inside Open MPI, which
    # with a stopped daemon does not always return promptly (not pinned down further).
    glimit=180
    for _ in $(seq 1 $((glimit * 5))); do
        left2=$(for p in $ranks2; do [[ -d /proc/$p ]] && echo "$p"; done)
        [[ -z $left2 ]] && break
        sleep 0.2
    done
    gtook=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    echo "node2's ranks gone after $gtook s with their daemon stopped (limit $glimit s)"
    check '[[ -z $left2 ]]' "node2's ranks end themselves within $glimit s (left: $left2)"
    t0=$(date +%s.%N)
    kill -CONT $orted2
    ;;
esac
limit=$((timeout_s + 30))
took=$(mwn_wait_gone "$limit" "$t0")
gone=$?
left=$(mwn_describe_pids)
wait "$job"
rc=$?
echo "fault $fault: every process gone after $took s (limit $limit s), mpirun exit status $rc"
grep -E "error|lost|aborting" "$MWN_ROOT/fault.out" | sort | uniq -c | head -n 8
if [[ $fault == daemon-stopped ]]; then
    check 'grep -q "MPI_Abort did not end this process within 10 s" "$MWN_ROOT/fault.out"' \
        "a rank on node2 said that its MPI_Abort did not end it and ended itself"
fi
check '((gone == 0))' "every process in every namespace gone within $limit s (took $took s; left: $left)"
check '((rc >= 128))' "exit status $rc is retryable (>= 128)"
check '! grep -q "^Epoch 2," "$MWN_ROOT/fault.out"' "the fault hit before the end of training"
# leftovers of the faulty run are gone: nothing would be killed here
check '[[ -z $(mwn_all_pids) ]]' "no orphan in any namespace: $(mwn_describe_pids)"

# 3. repair the network, resume in the same layout: bitwise equal to the uninterrupted run
ip -n "$MWN_BR" link set b1 up
ip -n "$MWN_BR" link set b2 up
mwn_wait_links
# A port that forwards again can still refuse the first TCP connections between nodes for a
# moment (seen about once in four runs on a loaded 2-core machine: Open MPI's "connect() to
# 10.x.0.1:1026 failed: Operation now in progress", then the set-up agreement times out, before
# any step). That is the repaired network, not the resume under test: once more, and said.
for attempt in 1 2; do
    mwn_mpirun 2 2 "$mw" "${flags[@]}" --resume --dump-weights "$MWN_DISK/resumed.bin" \
        >"$MWN_ROOT/resume.out" 2>&1
    rc=$?
    ((rc != 0 && attempt == 1)) && grep -q "connect() to .* failed" "$MWN_ROOT/resume.out" &&
        ! grep -q "^Epoch 1," "$MWN_ROOT/resume.out" || break
    echo "the repaired network refused the resume's first connections (exit $rc): once more"
    sleep 2
done
check '[[ $rc -eq 0 ]]' "resumed run completes (exit $rc): $(grep -vE "^$|^-" "$MWN_ROOT/resume.out" | grep -v "SIGTERM received" | tail -n 12)"
grep -o "restoring .*" "$MWN_ROOT/resume.out" | head -n 1
check 'grep -q "restoring .*ckpt-[0-9]* (epoch [0-9], step [0-9]* of it" "$MWN_ROOT/resume.out"' \
    "resumed from a mid-run checkpoint"
check '[[ -s $ref ]] && "$cmp" "$ref" "$MWN_ROOT/disk/node1/resumed.bin"' \
    "resumed weights bitwise equal to the uninterrupted run's"
finish
