#!/usr/bin/env bash
# The jobs around training on the GPU path, on fake devices (test_hostdev_train.sh says how: the
# hostdev module and the NCCL mock; it holds the layouts' numbers to the CPU's). Asserted:
#   - checkpoints on the GPU path: 1 epoch, then --resume to 2, equals 2 epochs straight,
#     bitwise (SGD, and Adam's amsgrad slot); `eval --device gpu` prints what the CPU eval
#     prints; an evaluator task on a GPU reports what the chief measured, and by default it
#     takes the CPU;
#   - failures end the job: an asynchronous NCCL error (exit 7) and a stuck stream past
#     --collective-timeout (exit 131) stop every rank with one message naming the step; the
#     deadline counts from the devices' last progress: collectives behind a backward longer
#     than it train (MW_HOSTDEV_SLOW), a stuck one after such a step still ends the job;
#   - synchronized BatchNormalization with 2 replicas on one GPU is refused, saying what to do;
#   - `mwtrain cluster` shows each rank's device(s) (table and JSON), and --device gpu without
#     a device is one error; test_device_fallback.sh skips (77) where rank 0 has a device;
#   - bad layouts are one message: ranks with different replica counts (exit 2), GPU and CPU
#     ranks mixed (exit 7), more than 16 GPUs for a rank (exit 2),
#     replicas not a multiple of the rank's GPUs (exit 2), two
#     ranks on one GPU (same PCI bus id; exit 7), no device with --device gpu (exit 7), and
#     no device with auto trains on the CPU.
# Not in the suite 'isa': what it compares is the same kernels on both sides (a resumed run
# against a straight one, the GPU eval against the CPU eval of one checkpoint), or exit codes
# and messages.
#   test_hostdev_jobs.sh HOSTDEV_MODULE MWTRAIN CMP_WEIGHTS
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/hostdev_common.sh"

cat >"$tmp/amsgrad.json" <<'JSON'
{"class_name": "Adam", "config": {"learning_rate": 0.002, "amsgrad": true, "global_clipnorm": 1.0}}
JSON
# Adam's amsgrad state through a checkpoint on the GPU path: straight equals 1 epoch + resume
MW_HOSTDEV_GPUS=2 timeout 120 "$hd" train "${quick[@]}" --epochs 2 --device gpu \
    --optimizer-config "$tmp/amsgrad.json" --checkpoint-every-epochs 1 \
    --checkpoint-dir "$tmp/ckams" --dump-weights "$tmp/ams-straight.bin" >"$tmp/ams1.out" 2>&1
MW_HOSTDEV_GPUS=2 timeout 120 "$hd" train "${quick[@]}" --epochs 1 --device gpu \
    --optimizer-config "$tmp/amsgrad.json" --checkpoint-every-epochs 1 \
    --checkpoint-dir "$tmp/ckams2" >"$tmp/ams2.out" 2>&1 &&
    MW_HOSTDEV_GPUS=2 timeout 120 "$hd" train "${quick[@]}" --epochs 2 --device gpu \
        --optimizer-config "$tmp/amsgrad.json" --checkpoint-every-epochs 1 --resume \
        --checkpoint-dir "$tmp/ckams2" --dump-weights "$tmp/ams-resumed.bin" >"$tmp/ams3.out" 2>&1
rc=$?
check '[[ $rc -eq 0 ]] && "$cmp" "$tmp/ams-straight.bin" "$tmp/ams-resumed.bin" >/dev/null' \
    "amsgrad resume on the GPU path is bitwise: $(tail -n 1 "$tmp/ams3.out") $("$cmp" "$tmp/ams-straight.bin" "$tmp/ams-resumed.bin" 2>&1)"

ck=(--steps-per-epoch 6 --test-examples 200 --progress none --summary-dir "" --device gpu
    --batch-per-replica 16)
MW_HOSTDEV_GPUS=2 timeout 120 "$hd" train "${ck[@]}" --epochs 2 --checkpoint-dir "$tmp/ckA" \
    --dump-weights "$tmp/straight.bin" >"$tmp/straight.out" 2>&1
rc=$?
check '[[ $rc -eq 0 ]]' "2 epochs straight: $(tail -n 2 "$tmp/straight.out")"
MW_HOSTDEV_GPUS=2 timeout 120 "$hd" train "${ck[@]}" --epochs 1 --checkpoint-dir "$tmp/ckB" \
    >"$tmp/first.out" 2>&1 &&
    MW_HOSTDEV_GPUS=2 timeout 120 "$hd" train "${ck[@]}" --epochs 2 --checkpoint-dir "$tmp/ckB" \
        --resume --dump-weights "$tmp/resumed.bin" >"$tmp/resumed.out" 2>&1
rc=$?
check '[[ $rc -eq 0 ]] && grep -q "restoring" "$tmp/resumed.out"' \
    "1 epoch + resume: $(tail -n 2 "$tmp/resumed.out")"
check '"$cmp" "$tmp/straight.bin" "$tmp/resumed.bin" >/dev/null' \
    "resume on the GPU path is bitwise: $("$cmp" "$tmp/straight.bin" "$tmp/resumed.bin")"
ev=(--checkpoint-dir "$tmp/ckA" --test-examples 300)
MW_HOSTDEV_GPUS=2 timeout 120 "$hd" eval --device gpu "${ev[@]}" >"$tmp/eval-gpu.out" 2>&1
timeout 120 "$mw" eval --device cpu "${ev[@]}" >"$tmp/eval-cpu.out" 2>&1
gpu_eval=$(grep "^Test Loss" "$tmp/eval-gpu.out") cpu_eval=$(grep "^Test Loss" "$tmp/eval-cpu.out")
check '[[ -n "$gpu_eval" && "$gpu_eval" == "$cpu_eval" ]]' \
    "eval --device gpu equals the CPU eval: '$gpu_eval' vs '$cpu_eval'"

# an evaluator task on the GPU path (--evaluator-device gpu): the chief on one fake GPU, the
# evaluator on its own
evcfg='{"cluster":{"chief":["localhost:2222"],"evaluator":["localhost:2224"]},'
evcfg+='"task":{"type":"chief","index":0}}'
timeout 120 mpiexec -n 2 -x MW_HOSTDEV_GPUS=1 -x TF_CONFIG="$evcfg" "$hd" train --device gpu \
    --evaluator-device gpu --epochs 2 --steps-per-epoch 3 --test-examples 100 --summary-dir "" --progress none \
    --checkpoint-dir "$tmp/ev" --checkpoint-every-epochs 1 >"$tmp/ev.out" 2>&1
rc=$?
check '[[ $rc -eq 0 ]] &&
       grep -qF "evaluator: waiting for checkpoints from the chief (evaluating on the GPU)" \
           "$tmp/ev.out"' "evaluator on the GPU: $(tail -n 3 "$tmp/ev.out")"
for e in 1 2; do
    chief=$(sed -n "s/^Epoch $e, .*\\(Test Loss: [0-9.]*, Test Accuracy: [0-9.]*\\),.*/\\1/p" \
        "$tmp/ev.out")
    check '[[ -n "$chief" ]] &&
           grep -qF "Evaluator: ckpt-$e (epoch $e, step $((3 * e))), $chief" "$tmp/ev.out"' \
        "the evaluator's ckpt-$e equals the chief's epoch $e ($chief)"
done

# by default the evaluator takes the CPU, not a trainer's GPU (EXCLUSIVE_PROCESS compute mode
# refuses a second process on a GPU): `cluster` says so, and it evaluates what the chief trained
out=$(timeout 60 mpiexec -n 2 -x MW_HOSTDEV_GPUS=1 -x TF_CONFIG="$evcfg" "$hd" cluster --json \
    --device gpu 2>&1)
check 'grep -qF "\"role\": \"chief\", \"device\": \"cuda:0\"}" <<<"$out" &&
       grep -qF "\"role\": \"evaluator\", \"device\": \"cpu\"}" <<<"$out"' \
    "cluster: the evaluator on the CPU by default: $out"
out=$(timeout 60 mpiexec -n 2 -x MW_HOSTDEV_GPUS=1 -x TF_CONFIG="$evcfg" "$hd" cluster --json \
    --device gpu --evaluator-device gpu 2>&1)
check 'grep -qF "\"role\": \"evaluator\", \"device\": \"cuda:0\"}" <<<"$out"' \
    "cluster: --evaluator-device gpu: $out"
timeout 120 mpiexec -n 2 -x MW_HOSTDEV_GPUS=1 -x TF_CONFIG="$evcfg" "$hd" train --device gpu \
    --epochs 1 --steps-per-epoch 3 --test-examples 100 --summary-dir "" --progress none \
    --checkpoint-dir "$tmp/evc" --checkpoint-every-epochs 1 >"$tmp/evc.out" 2>&1
chief=$(sed -n "s/^Epoch 1, .*\\(Test Loss: [0-9.]*, Test Accuracy: [0-9.]*\\),.*/\\1/p" \
    "$tmp/evc.out")
check '[[ -n "$chief" ]] &&
       grep -qF "evaluator: waiting for checkpoints from the chief (evaluating on the CPU)" \
           "$tmp/evc.out" && grep -qF "Evaluator: ckpt-1 (epoch 1, step 3), $chief" "$tmp/evc.out"' \
    "the evaluator on the CPU by default: $(tail -n 3 "$tmp/evc.out")"

# failures: every rank stops with one message, quickly
fault() { # name fault expected-exit expected-message [flags...]
    local name=$1 f=$2 want=$3 msg=$4
    shift 4
    local t0 rc took try
    for try in 1 2; do
        t0=$SECONDS
        timeout 120 mpiexec -n 2 -x MW_HOSTDEV_GPUS=2 -x MW_HOSTDEV_FAULT="$f" "$hd" train \
            "${quick[@]}" --device gpu "$@" >"$tmp/$name.out" 2>&1
        rc=$? took=$((SECONDS - t0))
        # Both ranks call MPI_Abort at once here, and Open MPI 4.1's mpiexec has been seen to
        # crash (SIGSEGV, 139) handling that (once in ~100 runs): that is mpiexec's own
        # failure, not the job's, so the case runs once more with the same checks.
        ((rc == 139 && try == 1)) || break
        echo "note: $name: mpiexec itself died of SIGSEGV; running the case again"
    done
    check "[[ $rc -eq $want && $took -lt 60 ]]" "$name: exit $rc (want $want) after $took s"
    # Each rank sees the fault and aborts; the first MPI_Abort may end the other rank before
    # it prints, so one line or two (a race seen in ~1 of 10 CI runs, on the untouched
    # loop too), never none, and no other error
    n=$(grep -c "$msg" "$tmp/$name.out")
    check "[[ $n -ge 1 && $n -le 2 ]]" \
        "$name: a rank says '$msg' ($n lines): $(grep error "$tmp/$name.out" | head -n 3)"
    check "! grep 'error:' '$tmp/$name.out' | grep -v 'aborting the job' | grep -qv '$msg'" \
        "$name: no other error: $(grep error "$tmp/$name.out" | head -n 4)"
    check "! grep -q '^Epoch' '$tmp/$name.out'" "$name: no epoch finished"
}
fault async async:5 7 \
    "error: NCCL all-reduce at step 4 on CUDA device .: NCCL reported an asynchronous error"
fault hang hang:5 131 "error: collective timeout: NCCL all-reduce at step 4 waited 3 s" \
    --collective-timeout 3

# A step longer than --collective-timeout is not a stuck one: with each collective 3 s behind
# devices that keep finishing work (MW_HOSTDEV_SLOW: a long backward before it), a deadline of 2 s
# counts from their last progress, so the run trains (serial and overlapped all-reduce) ...
for ov in off on; do
    timeout 120 mpiexec -n 2 -x MW_HOSTDEV_GPUS=2 -x MW_HOSTDEV_SLOW=3 "$hd" train "${quick[@]}" \
        --device gpu --steps-per-epoch 2 --collective-timeout 2 --overlap-allreduce "$ov" \
        >"$tmp/slow-$ov.out" 2>&1
    rc=$?
    check '[[ $rc -eq 0 ]] && grep -q "^Epoch 1, " "$tmp/slow-$ov.out"' \
        "slow devices, --overlap-allreduce $ov: exit $rc: $(grep -m 2 error "$tmp/slow-$ov.out")"
done
# ... and a collective that never completes after such a step still ends the job, 2 s after
# the devices' last progress (3 s after it started)
t0=$SECONDS
timeout 120 mpiexec -n 2 -x MW_HOSTDEV_GPUS=2 -x MW_HOSTDEV_SLOW=3 -x MW_HOSTDEV_FAULT=hang:2 \
    "$hd" train "${quick[@]}" --device gpu --collective-timeout 2 >"$tmp/slowhang.out" 2>&1
rc=$? took=$((SECONDS - t0))
msg="error: collective timeout: NCCL all-reduce at step 1 waited 5 s for CUDA device ., 2 s since \
this process's GPUs last finished a kernel (--collective-timeout 2)"
check '[[ $rc -eq 131 && $took -ge 5 && $took -lt 60 ]] && grep -q "$msg" "$tmp/slowhang.out" &&
       ! grep -q "^Epoch" "$tmp/slowhang.out"' \
    "slow devices, then a stuck collective: exit $rc after $took s: $(grep -m 1 error "$tmp/slowhang.out")"

# synchronized BatchNormalization on GPUs runs one replica per GPU: two on one GPU is refused
# before training, with one message saying what to do
out=$(MW_HOSTDEV_GPUS=1 timeout 60 "$hd" train "${quick[@]}" --device gpu \
    --model "$src/tests/data/keras/graph/syncbn_k3.json" --replicas-per-worker 2 2>&1)
rc=$?
check '[[ $rc -ne 0 ]] && ! grep -q "^Epoch" <<<"$out" && grep -qF "error: synchronized BatchNormalization on GPUs runs one replica per GPU; this rank has 2 replicas on 1 GPU(s): set --replicas-per-worker 1, or train on the CPU (--device cpu)" <<<"$out"' \
    "synchronized BN, 2 replicas on one GPU: refused: $out"

# `mwtrain cluster` shows what each rank trains on: 2 fake nodes x 2 ranks, 4 GPUs a node
fake2x2='{"cluster":{"worker":["node-a:2222","node-a:2223","node-b:2222","node-b:2223"]},'
fake2x2+='"task":{"type":"worker","index":0}}'
out=$(timeout 60 mpiexec -n 4 -x MW_HOSTDEV_GPUS=4 -x TF_CONFIG="$fake2x2" "$hd" cluster \
    --device gpu 2>&1)
rc=$?
check '[[ $rc -eq 0 ]] && grep -Eq "^1 +1 +worker\[1\] +node-a +0 +1 +worker +cuda:2-3$" <<<"$out" &&
       grep -Eq "^2 +2 +worker\[2\] +node-b +1 +0 +worker +cuda:0-1$" <<<"$out"' \
    "cluster --device gpu: $out"
out=$(timeout 60 mpiexec -n 2 -x MW_HOSTDEV_GPUS=2 "$hd" cluster --json 2>&1)
check 'grep -qF "\"role\": \"worker\", \"device\": \"cuda:1\"}" <<<"$out"' \
    "cluster --json has the device: $out"
out=$(timeout 60 mpiexec -n 2 "$hd" cluster --device gpu 2>&1)
rc=$?
check '[[ $rc -eq 7 &&
       $(grep -c "error: --device gpu: no CUDA device is available" <<<"$out") -eq 1 ]]' \
    "cluster --device gpu without a device: one error, exit 7: $out"
out=$(timeout 60 mpiexec -n 2 "$hd" cluster 2>&1)
rc=$?
check '[[ $rc -eq 0 ]] && grep -Eq "^1 +1 +worker\[1\] +.* +worker +cpu$" <<<"$out"' \
    "cluster without a device: cpu"

# tests/cuda/test_device_fallback.sh on a "GPU host": it decides from `mwtrain cluster --json`
# (rank 0 on cuda:0 here) and skips, where it once grepped for a line mwtrain never prints and
# failed
out=$(MW_HOSTDEV_GPUS=1 bash "$src/tests/cuda/test_device_fallback.sh" "$hd" 2>&1)
rc=$?
check '[[ $rc -eq 77 ]] && grep -qF "SKIP: rank 0 would train on cuda:0" <<<"$out"' \
    "device-fallback skips where a device exists: $out"

# bad layouts
out=$(MW_HOSTDEV_GPUS=2 "$hd" train "${quick[@]}" --device gpu --replicas-per-worker 3 2>&1)
rc=$?
check '[[ $rc -eq 2 ]] &&
       grep -qF "error: --replicas-per-worker 3: this rank drives 2 GPUs (CUDA devices 0..1)" \
           <<<"$out"' "replicas not a multiple of the GPUs: $out"
# two ranks that both see one device of the same PCI bus id: truly shared, refused by NCCL
seen='sees 1 CUDA device for 2 ranks and drives CUDA device 0: right when each rank was given'
shared='error: NCCL set-up: local ranks 0 and 1 both drive the GPU at PCI 0000:01:00.0'
out=$(timeout 120 mpiexec -n 2 -x MW_HOSTDEV_GPUS=1 "$hd" train "${quick[@]}" --device gpu 2>&1)
rc=$?
check '[[ $rc -eq 7 ]] && grep -qF "$seen" <<<"$out" &&
       [[ $(grep -cF "$shared" <<<"$out") -eq 1 ]] && ! grep -q "^Epoch" <<<"$out"' \
    "a shared GPU is refused once, exit 7: $out"
# ranks that disagree (two processes with their own environment or flags, mpiexec's ':')
one() { # RANK-1-GPUS RANK-2-GPUS FLAGS...: two ranks on two fake nodes
    local a=$1 b=$2
    shift 2
    timeout 120 mpiexec -n 1 -x TF_CONFIG="$two_nodes" -x MW_HOSTDEV_GPUS="$a" "$hd" train \
        "${quick[@]}" "$@" : -n 1 -x TF_CONFIG="$two_nodes" -x MW_HOSTDEV_GPUS="$b" "$hd" train \
        "${quick[@]}" "$@" 2>&1
}
out=$(one 1 2 --device gpu)
rc=$?
check '[[ $rc -eq 2 && $(grep -cF "error: ranks run different numbers of replicas (1 to 2)" \
       <<<"$out") -eq 1 ]] && ! grep -q "^Epoch" <<<"$out"' \
    "1 GPU on one node, 2 on the other: one error, exit 2: $out"
out=$(one 1 0 --device auto)
rc=$?
check '[[ $rc -eq 7 && $(grep -cF "error: some ranks train on a GPU and others on the CPU" \
       <<<"$out") -eq 1 ]]' "a GPU node and a CPU node: one error, exit 7: $out"
out=$(timeout 120 mpiexec -n 1 "$mw" train "${quick[@]}" --replicas-per-worker 1 : \
    -n 1 "$mw" train "${quick[@]}" --replicas-per-worker 2 2>&1)
rc=$?
check '[[ $rc -eq 2 && $(grep -cF "error: ranks run different numbers of replicas (1 to 2)" \
       <<<"$out") -eq 1 ]]' "CPU ranks with different --replicas-per-worker: exit 2: $out"
out=$(MW_HOSTDEV_GPUS=17 "$hd" train "${quick[@]}" --device gpu 2>&1)
rc=$?
check '[[ $rc -eq 2 ]] &&
       grep -qF "error: this rank was given 17 CUDA devices; a rank drives at most 16" <<<"$out"' \
    "17 GPUs for one rank: exit 2: $out"
out=$("$hd" train "${quick[@]}" --device gpu 2>&1)
rc=$?
check '[[ $rc -eq 7 ]] && grep -q "error: --device gpu: no CUDA device is available" <<<"$out"' \
    "no fake device, --device gpu: $out"
out=$("$hd" train "${quick[@]}" --device auto 2>&1)
rc=$?
check '[[ $rc -eq 0 ]] && grep -q "training on the CPU" <<<"$out" && grep -q "^Epoch 1" <<<"$out"' \
    "no fake device, --device auto trains on the CPU"


finish
