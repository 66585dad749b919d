#!/usr/bin/env bash
# Every blocking point of a run outside the training step is under --collective-timeout
# (docs/design.md: "fail loudly, never hang"). A rank stops itself at a chosen point
# (MW_FAULT=stop:POINT:RANK, common/fault.h: deterministic, unlike racing kill -STOP against the
# clock) and the job must end by itself with the retryable exit code 131, within the timeout plus a
# little, with no process left, and with a message naming the rank that did not arrive:
#   init     rank 1 stops before MPI_Init: the others' MPI_Init is guarded by the watchdog
#   setup    rank 1 stops before the set-up agreement: rank 0 names rank 1
#   restore  rank 1 stops before --resume's read and broadcast: rank 0 names rank 1
#   finish   rank 1 stops after the last epoch, before the shut-down agreement; the chief's
#            checkpoint is complete, and a --resume run afterwards finishes (nothing is lost)
#   evaluator the evaluator task (world rank 2) stops before the set-up agreement: the message
#            names rank 2, not the chief
#   wedge    every rank's first collective wait never returns (MW_FAULT=wedge:all, as ranks
#            blocked inside an MPI call whose peer's node is stopped): cluster/comm.c's
#            watchdog backstop ends each a margin after the deadline
#   test_hangs.sh MWTRAIN
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
mw=$1
tmp=$(mktemp -d)
unset TF_CONFIG MW_FAULT
T=5     # --collective-timeout
SLACK=30
cleanup() {
    # anything of ours still there (a failed case): continue it, then kill it
    pkill -CONT -f "$tmp/" 2>/dev/null
    pkill -9 -f "$tmp/" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
quick=(--epochs 1 --steps-per-epoch 3 --test-examples 50 --progress none --summary-dir ""
       --collective-timeout $T --threads 1)

# case NAME RANKS FAULT MESSAGE_REGEX [extra flags...]: run, then check exit 131, the time
# until every process is gone, that none is left, and the message
case_() {
    local name=$1 n=$2 fault=$3 re=$4
    shift 4
    local start end rc left
    start=$(date +%s.%N)
    timeout $((T + SLACK + 30)) mpiexec -n "$n" ${TFC:+-x TF_CONFIG="$TFC"} -x MW_FAULT="$fault" \
        "$mw" train "${quick[@]}" --checkpoint-dir "$tmp/ck-$name" "$@" >"$tmp/$name.out" 2>&1
    rc=$?
    # the job is over when mpiexec returns; give the kernel a moment to reap
    for _ in 1 2 3 4 5; do
        pgrep -f "$tmp/ck-$name" >/dev/null || break
        sleep 0.2
    done
    end=$(date +%s.%N)
    left=$(pgrep -fc "$tmp/ck-$name")
    took=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')
    echo "$name: exit $rc, every process gone after $took s ($left left)"
    check '[[ $rc -eq 131 ]]' "$name: exit 131 (got $rc): $(tail -n 5 "$tmp/$name.out")"
    check 'awk -v t="$took" -v m=$((T + SLACK)) "BEGIN { exit !(t <= m) }"' \
        "$name: gone within --collective-timeout + $SLACK s (took $took s)"
    check '[[ $left -eq 0 ]]' "$name: no process left ($left)"
    check 'grep -Eq "$re" "$tmp/$name.out"' "$name: message /$re/: $(grep -i error "$tmp/$name.out")"
    grep -E "$re" "$tmp/$name.out" | head -n 1 | sed 's/^/    /'
}

case_ init 2 stop:init:1 "error: MPI_Init did not return within $T s"
case_ setup 2 stop:setup:1 "collective timeout: agreement waited $T s for rank 1 "

# a checkpoint to resume from, then rank 1 stops before the restore
timeout 120 "$mw" train "${quick[@]}" --checkpoint-dir "$tmp/ck-restore" >/dev/null 2>&1
check '[[ -s $tmp/ck-restore/checkpoint ]]' "a checkpoint to resume from"
case_ restore 2 stop:restore:1 "collective timeout: agreement waited $T s for rank 1 " \
    --resume --epochs 2

case_ finish 2 stop:finish:1 "collective timeout: agreement waited $T s for rank 1 "
check 'grep -q "^Epoch 1," "$tmp/finish.out" && [[ -s $tmp/ck-finish/checkpoint ]]' \
    "finish: trained and checkpointed before the stop"
out=$(timeout 120 mpiexec -n 2 "$mw" train "${quick[@]}" --checkpoint-dir "$tmp/ck-finish" \
      --resume --epochs 2 2>&1)
rc=$?
check '[[ $rc -eq 0 ]] && grep -q "^Epoch 2," <<<"$out"' \
    "finish: a --resume run afterwards continues from the checkpoint: $out"

TFC='{"cluster":{"chief":["h:1"],"worker":["h:2"],"evaluator":["h:3"]},"task":{"type":"chief","index":0}}' \
    case_ evaluator 3 stop:setup:2 "collective timeout: agreement waited $T s for rank 2 "

case_ wedge 2 wedge:all "error: .* did not return within $((T + 5)) s \\(--collective-timeout\\)"

finish
