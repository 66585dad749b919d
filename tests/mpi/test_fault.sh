#!/usr/bin/env bash
# Fault tolerance under mpirun -n 2: kill -9 the non-chief rank in the middle
# of an epoch; every rank must have exited non-zero within 30 s; the rerun with
# --resume completes, and its final weights equal an uninterrupted run's
# bitwise. Also: mid-epoch checkpoints restore into the same step.
#   test_fault.sh MWTRAIN CMP_WEIGHTS
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
mw=$1 cmp=$2
tmp=$(mktemp -d)
flags=(train --epochs 2 --steps-per-epoch 200 --checkpoint-every-steps 50 --checkpoint-every-epochs 1
       --test-examples 200 --summary-dir "" --progress none --threads 1 --collective-timeout 60)
job=""
cleanup() { [[ -n $job ]] && kill -9 "$job" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT

# 1. the uninterrupted run
mpiexec -n 2 "$mw" "${flags[@]}" --checkpoint-dir "$tmp/a" --dump-weights "$tmp/full.bin" \
    >"$tmp/a.out" 2>&1
rc=$?
check '[[ $rc -eq 0 && -s $tmp/full.bin ]]' "uninterrupted run"

# 2. the same run, rank 1 killed once the checkpoint at step 100 (mid epoch 1) exists
mpiexec -n 2 "$mw" "${flags[@]}" --checkpoint-dir "$tmp/b" >"$tmp/b.out" 2>&1 &
job=$!
for _ in $(seq 1 600); do
    [[ -f $tmp/b/ckpt-2 ]] && break
    sleep 0.05
done
victim=""
for p in $(pgrep -f -- "--checkpoint-dir $tmp/b"); do
    tr '\0' '\n' </proc/"$p"/environ 2>/dev/null | grep -qx OMPI_COMM_WORLD_RANK=1 && victim=$p
done
check '[[ -n $victim && -f $tmp/b/ckpt-2 ]]' "rank 1 found after the step-100 checkpoint"
killed=$(date +%s)
kill -9 "$victim"
for _ in $(seq 1 300); do
    kill -0 "$job" 2>/dev/null || break
    sleep 0.1
done
alive=$(pgrep -f -- "--checkpoint-dir $tmp/b" | wc -l)
wait "$job"
rc=$?
job=""
took=$(($(date +%s) - killed))
echo "killed rank 1: job exit code $rc after $took s; checkpoints: $(ls "$tmp/b" | tr '\n' ' ')"
check '[[ $rc -ne 0 ]]' "the job exits non-zero"
check '((took <= 30 && alive == 0))' "every rank gone within 30 s (took $took s, $alive left)"
check '! grep -q "Epoch 2," "$tmp/b.out"' "killed before the end"

# 3. resume: completes and ends bitwise equal to the uninterrupted run
mpiexec -n 2 "$mw" "${flags[@]}" --checkpoint-dir "$tmp/b" --resume \
    --dump-weights "$tmp/resumed.bin" >"$tmp/c.out" 2>&1
rc=$?
check '[[ $rc -eq 0 ]]' "resumed run completes"
grep -o "restoring .*" "$tmp/c.out" | head -1
check 'grep -q "restoring .*ckpt-[0-9]* (epoch [01], step [0-9]* of it" "$tmp/c.out"' \
    "resumed from a mid-run checkpoint"
check '"$cmp" "$tmp/full.bin" "$tmp/resumed.bin"' "resumed weights bitwise equal"

# 4. resuming into another layout (saved with 2 ranks, resumed with 1 x 2 replicas) works
mpiexec -n 1 "$mw" "${flags[@]}" --epochs 3 --batch-per-replica 64 --replicas-per-worker 2 \
    --checkpoint-dir "$tmp/b" --resume >"$tmp/d.out" 2>&1
rc=$?
check '[[ $rc -eq 0 ]] && grep -q "^Epoch 3," "$tmp/d.out"' "resume into 1 rank x 2 replicas"
finish
