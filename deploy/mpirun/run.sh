#!/usr/bin/env bash
# Launch mwtrain with mpirun on the machines of an Open MPI hostfile, one rank per slot (per
# GPU). Passes --hostfile explicitly: Open MPI 5 ignores the OMPI_MCA_orte_* variables
# (orte_default_hostfile, ...) that older set-ups and some operators export. Always resumes
# from the last checkpoint, so re-running the same command after a failure or a preemption
# (exit 133) continues the job.
#   deploy/mpirun/run.sh HOSTFILE [mwtrain train flags...]
# Environment:
#   MWTRAIN   the binary, the same path on every host (default: mwtrain on PATH)
#   NP        ranks (default: every slot of HOSTFILE, counted by `mwtrain tf-config`)
#   CKPT_DIR  checkpoints, on the first host of HOSTFILE where the chief runs (default
#             ./mwtrain-ckpt); summaries go to CKPT_DIR/logs
#   NCCL_SOCKET_IFNAME, NCCL_IB_DISABLE, NCCL_DEBUG, MW_LOG: passed to every rank when set
#   MPIRUN_ARGS  more mpirun options, split on spaces (e.g. "--mca btl_tcp_if_include eth0")
set -euo pipefail
hostfile=${1:?usage: run.sh HOSTFILE [mwtrain train flags...]}
shift
MWTRAIN=${MWTRAIN:-mwtrain}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# Count the slots with mwtrain's own hostfile reader: a bad hostfile fails here with a message
# naming the line, before any rank starts.
np=${NP:-$("$MWTRAIN" tf-config --hostfile "$hostfile" | wc -l)}
ckpt=${CKPT_DIR:-$PWD/mwtrain-ckpt}
exports=()
for v in NCCL_SOCKET_IFNAME NCCL_IB_DISABLE NCCL_DEBUG MW_LOG; do
    if [[ -n ${!v:-} ]]; then exports+=(-x "$v"); fi
done
# --bind-to none: mwtrain runs --threads compute threads per rank; the default binding (one
# core per rank for np <= 2, else one socket) would squeeze them together. See README.md.
# --tune: Open MPI's settings to fail fast when a node is lost (mca-params.conf beside this
# script says why, line by line).
# Preemption (docs/running.md, "Preemption and divergence"): a SIGTERM or SIGINT to this script (a scheduler, the
# kubelet, Ctrl-C) is passed to mpirun as SIGUSR1, which mpirun forwards to every rank without
# killing them (a SIGTERM would make mpirun kill the ranks odls_base_sigkill_timeout later).
# The ranks stop at the next step, the chief saves it, all exit 133 and so does mpirun, and so
# this script. The same signal again within 1 s is the same request (coreutils `timeout`, and
# any wrapper that signals this script and then its process group, delivers one signal twice),
# as mwtrain takes it. A second signal later is passed on as SIGTERM: the ranks end at once,
# unsaved. The
# script never outlives the first signal by more than GRACE + 10 s (GRACE: mwtrain's
# --preemption-grace, 20 s unless the flags say; the ranks end themselves by then): after that mpirun gets SIGTERM,
# and 5 s later SIGKILL. A signal before mpirun has started ends the script (143).
# When mpirun itself was signalled (a process-group kill), it exits 1 whatever the ranks did:
# the chief's <checkpoint-dir>/preempted, newer than this run, says they saved, and 133 is
# returned instead. Exit codes: mwtrain's (README's table), 133 preempted and saved.
start=$(date +%s)
signals=0 pid="" backstop="" first_sig="" first_us=0
grace=20
prev=""
for a in "$@"; do # --preemption-grace S, if the flags give it
    [[ $prev == --preemption-grace ]] && grace=${a%.*}
    prev=$a
done
on_signal() {
    # microseconds, without a fork: a command substitution's subshell takes the default action
    # of the process group's copy of the signal, and its status 143 would end this script
    # (set -e); before bash 5, whole seconds
    local now=$((SECONDS * 1000000))
    [[ -z ${EPOCHREALTIME:-} ]] || now=${EPOCHREALTIME/[.,]/}
    # the same signal within 1 s of the first: the same request
    [[ $1 == "$first_sig" ]] && ((now - first_us < 1000000)) && return
    signals=$((signals + 1))
    ((signals > 1)) || first_sig=$1 first_us=$now
    # mpirun's pid: a signal right after its fork comes before `pid=$!`, and exiting then would
    # leave it running on its own ($! is empty until it is forked)
    pid=${pid:-$!}
    [[ -n $pid ]] || exit 143
    if ((signals == 1)); then
        # SIGUSR1 now and every 2 s (mpirun forwards it only to the ranks already started; a
        # repeat is no second signal to mwtrain), and the backstop: a job that does not end
        # within the grace is ended
        (for ((t = 0; t < grace + 10; t += 2)); do
            kill -USR1 "$pid" || exit
            sleep 2
        done
        kill -TERM "$pid" && sleep 5 && kill -KILL "$pid") 2>/dev/null &
        backstop=$!
    else
        kill -TERM "$pid" 2>/dev/null || true
    fi
}
trap 'on_signal TERM' TERM
trap 'on_signal INT' INT
# setsid: mpirun in a process group of its own, so a terminal's Ctrl-C (or a kill of this
# script's group) reaches this script alone, which passes it on as above
read -r -a more <<<"${MPIRUN_ARGS:-}"
# mwtrain-command
setsid mpirun --tune "$here/mca-params.conf" --hostfile "$hostfile" -n "$np" --map-by slot \
    --bind-to none "${exports[@]}" "${more[@]}" \
    "$MWTRAIN" train --resume --checkpoint-dir "$ckpt" --summary-dir "$ckpt/logs" "$@" &
pid=$!
rc=0
while :; do
    wait "$pid" && rc=0 || rc=$?
    # a trapped signal interrupts wait (status > 128) while mpirun still runs: wait again
    kill -0 "$pid" 2>/dev/null || break
done
# mpirun may have ended just after a signal interrupted the wait: its own status, if so
if ((rc > 128)); then
    wait "$pid" 2>/dev/null && rc=0 || { r=$?; ((r == 127)) || rc=$r; }
fi
# the backstop is not needed any more (nor its sleep)
[[ -z $backstop ]] || { pkill -P "$backstop" 2>/dev/null; kill "$backstop" 2>/dev/null; } || true
if ((rc == 1)) && [[ -f $ckpt/preempted ]] && (($(stat -c %Y "$ckpt/preempted") >= start)); then
    echo "run.sh: mpirun exited 1 after the ranks saved ($(head -n 1 "$ckpt/preempted")): 133" >&2
    rc=133
fi
exit "$rc"
