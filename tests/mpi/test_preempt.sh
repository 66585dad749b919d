#!/usr/bin/env bash
# Preemption under mpirun -n 2 started as deploy/ starts it (deploy/mpirun/run.sh, with its
# mca-params.conf). TRIALS times each (default 2, the suite 1; the closing note's numbers come
# from 5), at a
# random moment of the run, SIGTERM to: the launcher (run.sh: the kubelet's or Slurm's view),
# the chief (rank 0) and a worker (rank 1). Asserted for every trial:
#   - the launcher exits 133 and every process is gone within --preemption-grace (printed:
#     the time from the signal to the last process gone, median and worst per target);
#   - the chief's message names the step reached and the checkpoint saved, the checkpoint
#     directory holds the `preempted` mark, and the last checkpoint is at that step;
#   - run.sh again (it always resumes) ends with weights bitwise equal to an uninterrupted
#     run's.
# Then: a second SIGTERM to the chief (2 s after the first) ends the job at once, unsaved (nothing newer than before
# the signals, launcher exit neither 0 nor 133); a worker that cannot answer (SIGSTOP) leaves
# the chief to end at --preemption-grace (3 s here) with exit 131 and no mark; a SIGTERM to
# mpirun itself ends the job at once (133 only with the chief's mark) and a restart continues
# to the same weights.
#   test_preempt.sh MWTRAIN CMP_WEIGHTS DATADIR [TRIALS]
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
mw=$(realpath "$1") cmp=$2 data=$3 trials=${4:-2}
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
tmp=$(mktemp -d)
export MWTRAIN=$mw
echo "localhost slots=2" >"$tmp/hosts"
flags=(--model "$data/keras/mlp_k3.json" --epochs 3 --steps-per-epoch 1000 --batch-per-replica 16
       --threads 1 --progress none --test-examples 200 --checkpoint-every-epochs 1
       --collective-timeout 60)
pids=()
trap 'mw_end_runs "$tmp" "${pids[@]}"' EXIT
now() { date +%s.%N; }
# rank_pid DIR R: the pid of rank R of the run writing checkpoints to DIR, waiting for it (at
# most 30 s): rank 0 may print its start-up line before a loaded host has started rank 1, and a
# signal to no pid would leave the run to finish (empty when there is none)
rank_pid() {
    local p
    for _ in $(seq 1 300); do
        for p in $(pgrep -f -- "--checkpoint-dir $1( |$)"); do
            tr '\0' '\n' </proc/"$p"/environ 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2" &&
                echo "$p" && return 0
        done
        sleep 0.1
    done
}
# gone DIR T0: wait (at most 60 s) until no process of DIR's run is left; prints the seconds
# from T0
gone() {
    for _ in $(seq 1 600); do
        pgrep -f -- "--checkpoint-dir $1( |$)" >/dev/null || break
        sleep 0.1
    done
    awk -v a="$(now)" -v b="$2" 'BEGIN { printf "%.2f", a - b }'
}
# start DIR [flags]: run.sh in the background (pid in $job) once training has begun
start() {
    local dir=$1
    shift
    CKPT_DIR=$dir bash "$src/deploy/mpirun/run.sh" "$tmp/hosts" "${flags[@]}" "$@" >"$dir.out" 2>&1 &
    job=$!
    pids+=("$job")
    for _ in $(seq 1 300); do
        grep -q "rank(s) on 1 node(s)" "$dir.out" 2>/dev/null && break
        sleep 0.05
    done
}
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
worst() { printf '%s\n' "$@" | sort -g | tail -n 1; }

# the uninterrupted run
CKPT_DIR=$tmp/ref bash "$src/deploy/mpirun/run.sh" "$tmp/hosts" "${flags[@]}" \
    --dump-weights "$tmp/ref.bin" >"$tmp/ref.out" 2>&1
rc=$?
check '[[ $rc -eq 0 && -s $tmp/ref.bin ]]' "the uninterrupted run (exit $rc): $(tail -n 2 "$tmp/ref.out")"

for target in launcher chief worker; do
    times=()
    for i in $(seq 1 "$trials"); do
        d=$tmp/$target-$i
        start "$d"
        sleep "0.$((RANDOM % 10))$((RANDOM % 10))"
        case $target in
        launcher) victim=$job ;;
        chief) victim=$(rank_pid "$d" 0) ;;
        worker) victim=$(rank_pid "$d" 1) ;;
        esac
        check '[[ -n $victim ]]' "$target $i: its process found within 30 s"
        t0=$(now)
        kill -TERM "$victim"
        wait "$job"
        rc=$?
        took=$(gone "$d" "$t0")
        times+=("$took")
        step=$(sed -n 's/.*preempted (.*) after step \([0-9]*\) .*/\1/p' "$d.out" | head -n 1)
        latest=$(sed -n 's/.*saved checkpoint .*(epoch [0-9]*, step \([0-9]*\)).*/\1/p' "$d.out" | tail -n 1)
        echo "$target $i: exit $rc, gone after $took s, stopped after step ${step:-?} (last checkpoint at step ${latest:-?})"
        check '[[ $rc -eq 133 ]] && awk -v t="$took" "BEGIN { exit !(t <= 20) }"' \
            "$target $i: launcher exit 133 and all gone within the grace (exit $rc, $took s): $(grep -E 'Signal|signal [0-9]|corrupt|error|Abort' "$d.out" | head -n 12) $(grep -vE '^$|^-' "$d.out" | tail -n 3)"
        check '[[ -n $step && $step == "$latest" && -f $d/preempted ]] && grep -q "after step $step " "$d/preempted"' \
            "$target $i: the step reached ($step) is the last checkpoint ($latest), and marked: $(cat "$d/preempted" 2>/dev/null)"
        CKPT_DIR=$d bash "$src/deploy/mpirun/run.sh" "$tmp/hosts" "${flags[@]}" \
            --dump-weights "$d.bin" >"$d.resume.out" 2>&1
        rc=$?
        check '[[ $rc -eq 0 ]] && "$cmp" "$tmp/ref.bin" "$d.bin" >/dev/null' \
            "$target $i: --resume ends bitwise equal to the uninterrupted run (exit $rc): $("$cmp" "$tmp/ref.bin" "$d.bin" 2>&1 | tail -n 1)"
    done
    echo "signal to the $target: gone after median $(median "${times[@]}") s, worst $(worst "${times[@]}") s ($trials trials)"
done

# checkpoints DIR: how many whole checkpoints DIR holds (ckpt-N; not an atomic write's
# ckpt-N.tmp-PID, which a job ended at once may leave and a restore ignores)
checkpoints() { ls "$1" | grep -cE '^ckpt-[0-9]+$'; }

# stopped_worker NAME WAIT [flags]: a run whose worker is stopped (SIGSTOP) while the chief gets
# SIGTERM, so that the chief cannot finish the vote; then (after_signal, if defined) more, the
# worker continued after WAIT s; sets d, rc, took and before (the checkpoints before)
stopped_worker() {
    d=$tmp/$1
    local wait_s=$2
    shift 2
    start "$d" "$@"
    sleep 0.5
    local w c
    w=$(rank_pid "$d" 1) c=$(rank_pid "$d" 0)
    kill -STOP "$w"
    # the chief may be writing an epoch's checkpoint, which needs no worker: let it land, so
    # that "before" is what was saved before the signals
    sleep 0.3
    before=$(checkpoints "$d")
    t0=$(now)
    kill -TERM "$c"
    if declare -F after_signal >/dev/null; then after_signal "$c"; fi
    sleep "$wait_s"
    kill -CONT "$w" 2>/dev/null
    wait "$job"
    rc=$?
    took=$(gone "$d" "$t0")
}

# a second signal (past the 1 s within which the same signal is the same request): at once,
# unsaved
after_signal() {
    for _ in $(seq 1 100); do
        grep -q "SIGTERM received: stopping at the next step boundary" "$d.out" && break
        sleep 0.05
    done
    sleep 2 # past the 1 s window, with room for a loaded host's late handling of the first
    kill -TERM "$1"
}
stopped_worker twice 1
unset -f after_signal
check '[[ $rc -ne 0 && $rc -ne 133 && ! -f $d/preempted ]] && grep -q "SIGTERM received again: ending at once, without saving" "$d.out" &&
       [[ $(checkpoints "$d") -eq $before ]] && awk -v t="$took" "BEGIN { exit !(t <= 10) }"' \
    "two SIGTERMs: at once and unsaved (exit $rc, $took s, checkpoints $before before, now: $(ls "$d" | tr '\n' ' '), mark: $(cat "$d/preempted" 2>/dev/null)): $(grep -vE '^$|^-' "$d.out" | tail -n 6)"

# a worker that cannot answer: the chief ends at its grace (3 s), unsaved, and so does the job
stopped_worker stopped 5 --preemption-grace 3
check '[[ $rc -ne 0 && $rc -ne 133 && ! -f $d/preempted ]] && grep -q "the preemption grace (--preemption-grace 3 s) passed before the checkpoint was agreed: ending at once (exit 131)" "$d.out"' \
    "a stopped worker: the chief ends at the grace, unsaved (exit $rc, $took s): $(grep -vE '^$|^-' "$d.out" | tail -n 3)"

# SIGTERM to mpirun itself (a kill that bypasses run.sh): Open MPI passes it to the ranks one
# after the other and SIGKILLs them a second later, so whether they save is a race; what must
# hold is that the job ends at once, with 133 only if the chief marked its save, and that a
# restart continues from whatever was saved to the same weights
d=$tmp/mpirun
start "$d"
sleep 0.5
m=$(pgrep -f -- "^mpirun .*--checkpoint-dir $d( |$)")
t0=$(now)
kill -TERM "$m"
wait "$job"
rc=$?
took=$(gone "$d" "$t0")
check '( [[ $rc -eq 133 && -f $d/preempted ]] || [[ $rc -ne 0 && $rc -ne 133 && ! -f $d/preempted ]] || [[ $rc -eq 0 ]] ) && awk -v t="$took" "BEGIN { exit !(t <= 10) }"' \
    "SIGTERM to mpirun: the job ends at once (exit $rc, $took s, mark: $(cat "$d/preempted" 2>/dev/null))"
CKPT_DIR=$d bash "$src/deploy/mpirun/run.sh" "$tmp/hosts" "${flags[@]}" --dump-weights "$d.bin" \
    >"$d.resume.out" 2>&1
rc=$?
check '[[ $rc -eq 0 ]] && "$cmp" "$tmp/ref.bin" "$d.bin" >/dev/null' \
    "after a SIGTERM to mpirun, --resume ends bitwise equal to the uninterrupted run (exit $rc)"
finish
