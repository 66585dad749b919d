#!/usr/bin/env bash
# Preemption on 2 nodes x 2 ranks over TCP (lib.sh), launched as deploy/ launches it
# (deploy/mpirun/run.sh in the launcher's namespace, with its mca-params.conf). TRIALS times
# each (default 1; the closing note's numbers come from 5), at a random moment of training,
# SIGTERM to: the launcher (run.sh), the chief (rank 0, node1) and a worker on the other node
# (rank 3, node2). Asserted per trial: the launcher exits 133; every process in every
# namespace is gone within the grace (20 s; the time from the signal is printed, median and
# worst per target); the chief's node holds a checkpoint at the step reached and the mark;
# run.sh again (it always resumes) ends with weights bitwise equal to an uninterrupted 2 x 2
# run's.
#   test_preempt.sh MWTRAIN CMP_WEIGHTS DATADIR [TRIALS]
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
mw=$(realpath "$1") cmp=$(realpath "$2") data=$(realpath "$3") trials=${4:-1}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/lib.sh"
nodes_up 2
mwn_hostfile "$MWN_ROOT/hosts" 2 2
flags=(--model "$data/keras/mlp_k3.json" --epochs 3 --steps-per-epoch 500 --batch-per-replica 8
       --threads 1 --progress none --test-examples 200 --checkpoint-every-epochs 1
       --collective-timeout 60)
mca="--mca plm_rsh_agent $here/agent.sh --mca plm_rsh_no_tree_spawn 1 --mca btl self,vader,tcp
     --mca btl_tcp_if_include $MWN_SUBNET --mca oob_tcp_if_include $MWN_SUBNET"
launch() { # NAME [flags]: run.sh in the launcher, checkpoints on the chief's disk under NAME
    local name=$1
    shift
    node_exec 0 env MWTRAIN="$mw" CKPT_DIR="$MWN_DISK/$name" MPIRUN_ARGS="$(echo $mca)" \
        bash "$here/../../deploy/mpirun/run.sh" "$MWN_ROOT/hosts" "${flags[@]}" "$@"
}
now() { date +%s.%N; }
# rank_pid NODE RANK: the pid, waiting for it (at most 30 s: rank 0 may print its start-up line
# before a loaded host has started the others); empty when there is none
rank_pid() {
    local p
    for _ in $(seq 1 300); do
        for p in $(node_pids "$1"); do
            tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2" &&
                echo "$p" && return 0
        done
        sleep 0.1
    done
}
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

launch ref --dump-weights "$MWN_DISK/ref.bin" >"$MWN_ROOT/ref.out" 2>&1
rc=$?
ref=$MWN_ROOT/disk/node1/ref.bin
check '[[ $rc -eq 0 && -s $ref ]]' "the uninterrupted 2 x 2 run (exit $rc): $(tail -n 2 "$MWN_ROOT/ref.out")"

for target in launcher chief worker; do
    times=()
    for i in $(seq 1 "$trials"); do
        name=$target-$i out=$MWN_ROOT/$target-$i.out
        launch "$name" >"$out" 2>&1 &
        job=$!
        for _ in $(seq 1 600); do
            grep -q "rank(s) on 2 node(s)" "$out" 2>/dev/null && break
            sleep 0.05
        done
        sleep "0.$((RANDOM % 10))$((RANDOM % 10))"
        case $target in
        launcher) victim=$(for p in $(node_pids 0); do grep -q "deploy/mpirun/run.sh" "/proc/$p/cmdline" 2>/dev/null && echo "$p"; done | head -n 1) ;;
        chief) victim=$(rank_pid 1 0) ;;
        worker) victim=$(rank_pid 2 3) ;;
        esac
        check '[[ -n $victim ]]' "$target $i: its process found within 30 s"
        t0=$(now)
        kill -TERM $victim
        wait "$job"
        rc=$?
        took=$(mwn_wait_gone 60 "$t0")
        times+=("$took")
        step=$(sed -n 's/.*preempted (.*) after step \([0-9]*\) .*/\1/p' "$out" | head -n 1)
        disk=$MWN_ROOT/disk/node1/$name
        echo "$target $i: exit $rc, every process gone after $took s, stopped after step ${step:-?}"
        check '[[ $rc -eq 133 ]] && awk -v t="$took" "BEGIN { exit !(t <= 20) }"' \
            "$target $i: exit 133 and all gone within the grace (exit $rc, $took s): $(grep -vE '^$|^-' "$out" | tail -n 3)"
        check '[[ -n $step && -f $disk/preempted ]] && grep -q "after step $step " "$disk/preempted" && grep -q "saved checkpoint .*(epoch [0-9]*, step $step)" "$out"' \
            "$target $i: a checkpoint at the step reached ($step) on the chief's node, marked"
        launch "$name" --dump-weights "$MWN_DISK/$name.bin" >"$out.resume" 2>&1
        rc=$?
        check '[[ $rc -eq 0 ]] && "$cmp" "$ref" "$MWN_ROOT/disk/node1/$name.bin" >/dev/null' \
            "$target $i: --resume ends bitwise equal (exit $rc): $(tail -n 2 "$out.resume")"
    done
    echo "signal to the $target: every process gone after median $(median "${times[@]}") s, worst $(printf '%s\n' "${times[@]}" | sort -g | tail -n 1) s ($trials trials)"
done
finish
