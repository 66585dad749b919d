#!/usr/bin/env bash
# One termination request is one request (docs/running.md, "Preemption and divergence"):
#   - timeout: TRIALS runs of `timeout --preserve-status -s TERM T mwtrain train` (coreutils
#     `timeout` delivers its one SIGTERM twice, to the child and to its process group) with T
#     at a random moment of training: every one exits 133 with the step reached saved and
#     marked. MPI_TRIALS the same through `deploy/mpirun/run.sh` (mpirun -n 2) under
#     `timeout -s TERM` (the script gets the signal twice, mpirun SIGUSR1), and a bare
#     `mpirun -n 2` under `timeout -s USR1` (mpirun forwards SIGUSR1 and gets it twice; a
#     SIGTERM to mpirun is Open MPI's own kill of the ranks, docs/running.md).
#   - start: a SIGTERM the moment the process starts (MW_FAULT=stop:start, before the flags are
#     parsed and any file is read) is a request for train (133, saved) and ends export at once
#     with 143 and one line, never a silent 143.
#   - window: two SIGTERMs 0.3 s apart are one request; a SIGTERM 2.3 s after the first ends
#     the process at once (143, unsaved), and so does a different signal; a checkpoint's
#     temporary file (MW_FAULT=hold:temp: the save held after creating it) is removed, and
#     so is it when the grace (--preemption-grace 1) ends the process (131).
#   - export: a SIGTERM while `export` holds OUTPUT.tmp.PID removes it and leaves OUTPUT as it
#     was (143).
#   test_signals.sh MWTRAIN
# Environment: MW_SIGNAL_TRIALS (default 5), MW_SIGNAL_MPI_TRIALS (default 1 each way).
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
mw=$(realpath "$1")
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
trials=${MW_SIGNAL_TRIALS:-5} mpi_trials=${MW_SIGNAL_MPI_TRIALS:-1}
tmp=$(mktemp -d)
mpirun=${MPIEXEC:-mpirun}
echo "localhost slots=2" >"$tmp/hosts"
# 30 epochs: training outlasts the latest signal (start-up + 2.2 s) on any machine
flags=(--model "$src/tests/data/keras/mlp_k3.json" --epochs 30 --steps-per-epoch 1000
       --batch-per-replica 16 --threads 1 --progress none --test-examples 200
       --checkpoint-every-epochs 1 --collective-timeout 60)
pids=()
trap 'mw_end_runs "$tmp" "${pids[@]}"' EXIT
now() { date +%s.%N; }
since() { awk -v a="$(now)" -v b="$1" 'BEGIN { printf "%.2f", a - b }'; }
# saved D OUT: the step of OUT's "preempted (a signal) after step N", when D/preempted marks
# it and D's last checkpoint is at that step; else nothing
saved() {
    local step latest
    step=$(sed -n 's/.*preempted (a signal[a-z ]*) after step \([0-9]*\) .*/\1/p' "$2" | head -n 1)
    latest=$(sed -n 's/.*saved checkpoint .*(epoch [0-9]*, step \([0-9]*\)).*/\1/p' "$2" | tail -n 1)
    [[ -n $step && $step == "$latest" && -f $1/preempted ]] && grep -q "after step $step " "$1/preempted" &&
        echo "$step"
}
# wait_for FILE TEXT: until FILE holds TEXT (at most 30 s)
wait_for() {
    for _ in $(seq 1 300); do
        grep -q "$2" "$1" 2>/dev/null && return 0
        sleep 0.1
    done
    return 1
}
# at_random S: a moment S + [0.2, 2.2) s after the start, printed with 2 decimals
at_random() { awk -v s="$1" -v r="$RANDOM" 'BEGIN { printf "%.2f", s + 0.2 + 2 * r / 32768 }'; }

# the start-up: seconds until training begins (a run of one step, its set-up and exit)
t0=$(now)
"$mw" train "${flags[@]}" --epochs 1 --steps-per-epoch 1 --checkpoint-dir "$tmp/cal" \
    >"$tmp/cal.out" 2>&1
check '[[ $? -eq 0 ]]' "a one-step run: $(tail -n 2 "$tmp/cal.out")"
startup=$(since "$t0")
echo "start-up and one step: $startup s"

# trial D LABEL CMD...: CMD (its output in D.out) must exit 133 with the step reached saved in
# D and marked, nothing ended at once; ok=1 when so
trial() {
    local d=$1 label=$2 again=""
    shift 2
    "$@" >"$d.out" 2>&1
    rc=$?
    step=$(saved "$d" "$d.out")
    ok=0
    [[ $rc -eq 133 && -n $step ]] && ! grep -q "ending at once" "$d.out" && ok=1
    grep -q "again within" "$d.out" && again=" (the repeat taken as the same request)"
    echo "$label: exit $rc, saved at step ${step:-none}$again"
    check '((ok))' "$label: exit 133 and the step saved (exit $rc): $(grep -vE '^$|^-' "$d.out" | tail -n 4)"
}

# ---- timeout: one signal, delivered twice ----
good=0
for i in $(seq 1 "$trials"); do
    d=$tmp/t$i T=$(at_random "$startup")
    trial "$d" "timeout $T" timeout --preserve-status -s TERM "$T" "$mw" train "${flags[@]}" \
        --checkpoint-dir "$d"
    good=$((good + ok))
done
echo "timeout -s TERM: $good of $trials saved and exited 133"

# ---- the same through mpirun -n 2 ----
t0=$(now)
CKPT_DIR=$tmp/mcal MWTRAIN=$mw bash "$src/deploy/mpirun/run.sh" "$tmp/hosts" "${flags[@]}" \
    --epochs 1 --steps-per-epoch 1 >"$tmp/mcal.out" 2>&1
check '[[ $? -eq 0 ]]' "a one-step run.sh run: $(tail -n 2 "$tmp/mcal.out")"
mstartup=$(since "$t0")
echo "run.sh start-up and one step: $mstartup s"
good=0 bare=0
for i in $(seq 1 "$mpi_trials"); do
    d=$tmp/m$i T=$(at_random "$mstartup")
    trial "$d" "timeout $T run.sh (mpirun -n 2)" env CKPT_DIR="$d" MWTRAIN="$mw" \
        timeout --preserve-status -s TERM "$T" bash "$src/deploy/mpirun/run.sh" "$tmp/hosts" \
        "${flags[@]}"
    good=$((good + ok))
    d=$tmp/b$i T=$(at_random "$mstartup")
    trial "$d" "timeout -s USR1 $T mpirun -n 2" timeout --preserve-status -s USR1 "$T" \
        "$mpirun" -n 2 --bind-to none "$mw" train "${flags[@]}" --checkpoint-dir "$d"
    bare=$((bare + ok))
done
echo "timeout -s TERM run.sh: $good of $mpi_trials saved and exited 133;" \
    "timeout -s USR1 mpirun: $bare of $mpi_trials"

# ---- a signal the moment the process starts ----
# start_stopped NAME ARGS...: mwtrain ARGS in the background, stopped at MW_FAULT's 'start'
start_stopped() {
    local out=$tmp/$1.out
    shift
    MW_FAULT=stop:start:0 "$mw" "$@" >"$out" 2>&1 &
    job=$!
    pids+=("$job")
    wait_for "$out" "MW_FAULT: stopping at 'start'"
}
start_stopped early-train train "${flags[@]}" --checkpoint-dir "$tmp/early"
kill -TERM "$job" && kill -CONT "$job"
wait "$job"
rc=$?
step=$(saved "$tmp/early" "$tmp/early-train.out")
check '[[ $rc -eq 133 && -n $step ]] && grep -q "SIGTERM received: stopping at the next step boundary" "$tmp/early-train.out"' \
    "train, SIGTERM at start: a request, saved, exit 133 (exit $rc): $(cat "$tmp/early-train.out")"
start_stopped early-export export --checkpoint-dir "$tmp/early" --output "$tmp/early.keras" \
    --format keras
kill -TERM "$job" && kill -CONT "$job"
wait "$job"
rc=$?
check '[[ $rc -eq 143 && ! -e $tmp/early.keras ]] && grep -q "^mwtrain: SIGTERM received: ending at once (exit 143)$" "$tmp/early-export.out"' \
    "export, SIGTERM at start: ended at once with one line, exit 143 (exit $rc): $(cat "$tmp/early-export.out")"

# ---- the window, and the temporary files ----
# held NAME ARGS...: mwtrain ARGS in the background, held once its first temporary file exists
held() {
    out=$tmp/$1.out
    shift
    MW_FAULT=hold:temp:0 "$mw" "$@" >"$out" 2>&1 &
    job=$!
    pids+=("$job")
    wait_for "$out" "MW_FAULT: holding at 'temp'"
}
# no_temps DIR: no temporary file of an atomic write left in DIR
no_temps() { ! ls "$1" | grep -qE '\.tmp[-.][0-9]+$'; }
short=(--model "$src/tests/data/keras/mlp_k3.json" --epochs 2 --steps-per-epoch 20
       --batch-per-replica 16 --threads 1 --progress none --test-examples 200)
held twice train "${short[@]}" --checkpoint-dir "$tmp/twice"
had=$(ls "$tmp/twice" | grep -c '\.tmp-')
kill -TERM "$job"
sleep 0.3
kill -TERM "$job"
sleep 2 # past the 1 s window with room for a loaded host's late handling of the first
kill -TERM "$job"
wait "$job"
rc=$?
check '[[ $had -eq 1 && $rc -eq 143 ]] && no_temps "$tmp/twice" && ! ls "$tmp/twice" | grep -q "^ckpt-[0-9]*$" &&
       grep -q "SIGTERM received again within 1 s of the first: the same request" "$out" &&
       grep -q "SIGTERM received again: ending at once, without saving (exit 143)" "$out" &&
       grep -q "removed the unfinished $tmp/twice/ckpt-1.tmp-" "$out"' \
    "SIGTERM, again after 0.3 s (the same request), again after 2.3 s: at once, unsaved, the temporary checkpoint removed (exit $rc, $had temporary file(s) before): $(cat "$out") $(ls "$tmp/twice")"
held other train "${short[@]}" --checkpoint-dir "$tmp/other"
kill -TERM "$job"
sleep 0.2
kill -INT "$job"
wait "$job"
rc=$?
check '[[ $rc -eq 130 ]] && no_temps "$tmp/other" && grep -q "SIGINT received again: ending at once, without saving (exit 130)" "$out"' \
    "SIGTERM then SIGINT: at once (exit $rc): $(cat "$out")"
held grace train "${short[@]}" --checkpoint-dir "$tmp/grace" --preemption-grace 1
kill -TERM "$job"
wait "$job"
rc=$?
check '[[ $rc -eq 131 ]] && no_temps "$tmp/grace" && grep -q "removed the unfinished $tmp/grace/ckpt-1.tmp-" "$out"' \
    "a held save past --preemption-grace 1: exit 131, the temporary checkpoint removed (exit $rc): $(cat "$out")"

# export: OUTPUT.tmp.PID removed, OUTPUT as it was
echo "an older file" >"$tmp/out.keras"
held export export --checkpoint-dir "$tmp/early" --output "$tmp/out.keras" --format keras
had=$(ls "$tmp" | grep -c '^out\.keras\.tmp\.')
kill -TERM "$job"
wait "$job"
rc=$?
check '[[ $had -eq 1 && $rc -eq 143 ]] && no_temps "$tmp" && [[ $(cat "$tmp/out.keras") == "an older file" ]] &&
       grep -q "removed the unfinished $tmp/out.keras.tmp.[0-9]*$" "$out"' \
    "export interrupted: OUTPUT.tmp.PID removed, OUTPUT unchanged, exit 143 (exit $rc, $had before): $(cat "$out") $(ls "$tmp")"
finish
