#!/usr/bin/env bash
# A stopped rank (SIGSTOP) must not leave the job hanging: with a short
# --collective-timeout the other rank reports whom it waited for and at which
# step, and the whole job ends with the retryable exit code (131) well within
# the time limit. The same for a rank stopped inside a step's synchronized BatchNormalization
# all-reduce (MW_FAULT=stop:bn-sync:1): the message names the layer and the step.
#   test_stall.sh MWTRAIN
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
mw=$1
tmp=$(mktemp -d)
timeout=3
start=$(date +%s)
mpiexec -n 2 "$mw" train --epochs 1 --steps-per-epoch 100000 --progress lines \
    --progress-interval 0.2 --collective-timeout $timeout --threads 1 --checkpoint-every-epochs 0 \
    --summary-dir "" >"$tmp/out" 2>"$tmp/err" &
job=$!
cleanup() { pkill -CONT -f "$mw train --epochs 1 --steps-per-epoch 100000" 2>/dev/null; kill "$job" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
# wait until training runs (a progress line), then stop rank 1
for _ in $(seq 1 300); do
    grep -q "step" "$tmp/err" 2>/dev/null && break
    sleep 0.1
done
victim=""
for p in $(pgrep -f "$mw train --epochs 1 --steps-per-epoch 100000"); do
    if tr '\0' '\n' </proc/"$p"/environ 2>/dev/null | grep -qx OMPI_COMM_WORLD_RANK=1; then
        victim=$p
    fi
done
check '[[ -n $victim ]]' "found rank 1's process"
stopped=$(date +%s)
kill -STOP "$victim"
# the job must end by itself: allow the timeout plus generous slack
for _ in $(seq 1 300); do
    kill -0 "$job" 2>/dev/null || break
    sleep 0.1
done
kill -0 "$job" 2>/dev/null && { echo "job still running 30 s after SIGSTOP"; kill -9 "$job"; }
wait "$job"
rc=$?
took=$(($(date +%s) - stopped))
echo "exit code $rc, $took s after SIGSTOP; stderr:"
grep -v "^\s*$" "$tmp/err" | grep -v "step" | head -20
check '[[ $rc -eq 131 ]]' "exit code 131 (got $rc)"
check '((took <= 25))' "ended within 25 s of the stop (took $took s)"
check 'grep -q "collective timeout: .* at step [0-9]* waited [0-9]* s for rank 1" "$tmp/err"' \
    "message names the step and rank 1"
check 'grep -q "aborting the job (exit code 131)" "$tmp/err"' "says it aborts"

# a rank stopped before a synchronized BatchNormalization's all-reduce, inside the step
src=${MW_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
start=$(date +%s)
MW_FAULT=stop:bn-sync:1 timeout -k 5 60 mpiexec -n 2 "$mw" train \
    --model "$src/tests/data/keras/graph/syncbn_k3.json" --epochs 1 --steps-per-epoch 5 \
    --collective-timeout $timeout --threads 1 --checkpoint-every-epochs 0 --summary-dir "" \
    --progress none >"$tmp/bn.out" 2>"$tmp/bn.err"
rc=$?
took=$(($(date +%s) - start))
pkill -9 -f "$src/tests/data/keras/graph/syncbn_k3.json" 2>/dev/null
echo "bn-sync stop: exit code $rc after $took s"
check '[[ $rc -eq 131 ]]' "bn-sync stop: exit code 131 (got $rc)"
check '((took <= 25))' "bn-sync stop: ended within 25 s (took $took s)"
check 'grep -q "collective timeout: synchronized BatchNormalization all-reduce (layer .bn_a., forward) at step 0 waited" "$tmp/bn.err"' \
    "bn-sync stop: the message names the layer and the step"
finish
