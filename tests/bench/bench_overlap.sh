#!/usr/bin/env bash
# Step time with --overlap-allreduce off against on (worker/replicas/overlap.h): 2 ranks on
# this host (shared memory), then 2 nodes x 2 ranks in network namespaces (tests/nodes/lib.sh:
# the cross-node ring over TCP through a veth bridge). Rounds alternate off and on, so both
# see the same load; each run trains STEPS steps of MODEL and its step time is its epoch's
# time / STEPS; the medians per setting are printed with their ratio. Not in CI (root,
# minutes); run by hand when the machine is quiet:
#   tests/bench/bench_overlap.sh MWTRAIN [rounds=5] [steps=40] [model: the tutorial CNN]
# (BENCH_FLAGS: more flags for every run, such as --bucket-mb 0.1)
set -uo pipefail
mw=$(realpath "$1") rounds=${2:-5} steps=${3:-40} model=${4:-}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/../nodes/lib.sh"
flags=(train --epochs 1 --steps-per-epoch "$steps" --progress none --quiet
       --checkpoint-every-epochs 0 --summary-dir "" --test-examples 32 --batch-per-replica 32)
[[ -n $model ]] && flags+=(--model "$(realpath "$model")")
read -ra extra <<<"${BENCH_FLAGS:-}"
flags+=("${extra[@]}")
# secs LOG: the epoch's seconds per step, in ms
secs() { sed -n 's/^Epoch 1,.*Time: \([0-9.]*\) s.*/\1/p' "$1" | awk -v n="$steps" '{ printf "%.2f", 1000 * $1 / n }'; }
median() { tr ' ' '\n' | grep . | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# bench LABEL LAUNCHER...: alternating rounds, then the medians
bench() {
    local label=$1 off=() on=() o
    shift
    for ((r = 0; r < rounds; r++)); do
        for o in off on; do
            "$@" "$mw" "${flags[@]}" --overlap-allreduce "$o" >"$MWN_ROOT/$o.log" 2>&1 ||
                { echo "$label: $o failed: $(tail -n 2 "$MWN_ROOT/$o.log")"; return 1; }
            if [[ $o == off ]]; then off+=("$(secs "$MWN_ROOT/$o.log")"); else on+=("$(secs "$MWN_ROOT/$o.log")"); fi
        done
    done
    local a b
    a=$(median <<<"${off[*]}") b=$(median <<<"${on[*]}")
    echo "== $label: ms/step off ${off[*]} | on ${on[*]}"
    awk -v a="$a" -v b="$b" -v l="$label" \
        'BEGIN { printf "%s: median ms/step off %.2f, on %.2f, off/on %.3f\n", l, a, b, a / b }'
}
nodes_up 2
bench "2 ranks, 1 node" mpirun -n 2 --oversubscribe --bind-to none
bench "2 nodes x 2 ranks (TCP)" mwn_mpirun 2 2
