#!/usr/bin/env bash
# The evaluator task: chief + worker train, the evaluator (outside the training
# communicator) receives every checkpoint from the chief, evaluates it, writes
# eval summaries and exits when training has finished; its numbers equal the
# chief's own test metrics for the same weights. A failing set-up on any task
# ends all three with one message.
#   test_evaluator.sh MWTRAIN
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
mw=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export TF_CONFIG='{"cluster":{"chief":["localhost:2222"],"worker":["localhost:2223"],"evaluator":["localhost:2224"]},"task":{"type":"chief","index":0}}'
timeout 120 mpiexec -n 3 "$mw" train --epochs 3 --steps-per-epoch 10 --test-examples 300 \
    --checkpoint-every-epochs 1 --checkpoint-dir "$tmp/ck" --summary-dir "$tmp/logs" \
    --progress none >"$tmp/out" 2>"$tmp/err"
rc=$?
check '[[ $rc -eq 0 ]]' "the job completes"
check '[[ $(grep -c "^Evaluator: ckpt-[123] (epoch [123], step [0-9]*), Test Loss" "$tmp/out") -eq 3 ]]' \
    "three checkpoints evaluated"
chief=$(sed -n 's/^Epoch.*Test Accuracy: \([0-9.]*\),.*/\1/p' "$tmp/out" | tr '\n' ' ')
evaluator=$(sed -n 's/^Evaluator:.*Test Accuracy: \([0-9.]*\)$/\1/p' "$tmp/out" | tr '\n' ' ')
echo "chief: $chief; evaluator: $evaluator"
check '[[ -n $chief && $chief == "$evaluator" ]]' "the evaluator's accuracies equal the chief's"
check '[[ $(wc -l <"$tmp/logs/eval/metrics.csv") -eq 4 ]] && ls "$tmp"/logs/eval/events.out.tfevents.* >/dev/null' \
    "eval summaries written"
check 'grep -q "evaluator: training has finished" "$tmp/err"' "the evaluator saw the end"

timeout 60 mpiexec -n 3 "$mw" train --epochs 1 --data-dir "$tmp/nowhere" >"$tmp/out2" 2>"$tmp/err2"
rc=$?
check '[[ $rc -eq 4 || $rc -eq 3 ]]' "a bad data dir fails every task (exit $rc)"
check '[[ $(grep -c "mwtrain: error:" "$tmp/err2") -eq 1 ]]' "one message"
finish
