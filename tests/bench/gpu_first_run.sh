#!/usr/bin/env bash
# The first run on a GPU host, in one command, so that a short loan of a GPU is spent running,
# not typing. In this order (the cheap and decisive first: a run cut short by its deadline keeps
# the answers that matter most):
#   1. meson test --suite cuda (a bundle: test_cuda alone, where a skip is a failure);
#   2. GPU against CPU with the same replicas: SGD weights after a short epoch within a
#      tolerance measured on the spot (10 x --backend ref against --backend cpu, and the weights
#      must move 100 x more than it), one rank with a replica per GPU, two replicas per GPU, and
#      with two GPUs or more mpirun -n 2 (a GPU per rank) and the same with --overlap-allreduce
#      on (bitwise the serial path's weights); then the tutorial's Adam epoch, whose
#      test accuracy on the GPU must be within 2 points of the CPU's; mixed_bfloat16's and
#      mixed_float16's updates against the CPU's; a token GPT's SGD weights against the CPU's,
#      and two GPU runs of it with dropout and Adam bitwise equal (one and two replicas per GPU),
#      and equal to a third with --cuda-graphs on, which must have replayed graphs;
#   3. throughput (images/s, the median of the rounds' second epochs) of the tutorial CNN at
#      64 and 1024 examples per replica, FP32, --tf32, mixed_bfloat16 and mixed_float16
#      (PyTorch: autocast to bfloat16; to float16 with a GradScaler), at 64 also FP32 with
#      --cuda-graphs on (its ratio to FP32 without), and PyTorch on the same GPU
#      (tests/bench/peer_torch.py --device cuda), rounds alternating the two, both pinned to
#      one GPU; then a GPT of width 768, 12 blocks, context 1024, batch 8 (tokens/s and peak GPU
#      memory, float32 and mixed_bfloat16) against PyTorch's (tests/bench/peer_torch_lm.py
#      --device cuda: scaled_dot_product_attention, autocast bfloat16); between the two
#      tables (with --no-throughput, before the sanitizers), every layer family twice: two GPU
#      runs of each Keras gradient-check model bitwise equal;
#   4. test_cuda under compute-sanitizer memcheck and racecheck, judged on their summaries.
# Each check is one line of OUTDIR/report.md (PASS, FAIL or SKIP with its numbers); each run's
# output is kept beside it. Exit 0 when nothing failed, 1 when something did, 77 (SKIP) when
# no GPU is visible and rank 0 would not train on one; where a GPU is visible (nvidia-smi,
# /dev/nvidia0) and mwtrain would not use it, exit 1 with mwtrain's reason.
#
#   gpu_first_run.sh BUILDDIR [OUTDIR] [--quick] [--no-throughput] [--rounds=N] [--tp-steps=N]
#                    [--sgd-steps=N] [--budget=S]
#
# BUILDDIR: a build with CUDA (worker/mwtrain, worker/mwtrain-cuda.so, tests/cuda/test_cuda,
# tests/mpi/cmp_weights), or a bundle of one (tests/bench/gpu_bundle.sh). OUTDIR defaults to
# ./gpu-first-run. --quick: no meson test and no compute-sanitizer, few steps, one round (the
# dry run on fake devices, tests/cuda/meson.build); --no-throughput: checks 1, 2 and 4;
# --rounds=N: N throughput rounds (default 3); --tp-steps=N: at most N steps per epoch in a
# throughput run (default 300, --quick 10; the dry run takes 1: its numbers mean nothing);
# --sgd-steps=N: the SGD agreements' steps (default 50, --quick 20; the dry run's negative
# control takes 2, enough to disagree); --budget=S: once S seconds have passed since the start
# (default 480, so that a 10-minute command limit leaves the report written; 0: none), each
# throughput line, the layer families' twins and compute-sanitizer not yet begun is a SKIP line
# saying so. The GPT table
# runs before the CNN's: its numbers are the ones the GPU work is judged by.
# Data: Fashion-MNIST at its Debian path, else the bundle's 30000 examples of it, else a
# random set of its shape written with numpy (then the report says the agreement checks little).
# Environment: MW_FIRST_RUN_CPU_FLAGS, extra flags for the CPU side of the comparisons (the dry
# run's negative control uses it to make them disagree).
set -uo pipefail
build=${1:?usage: gpu_first_run.sh BUILDDIR [OUTDIR] [--quick]}
out=gpu-first-run quick=0 throughput=1 rounds="" tp_steps="" sgd_opt="" budget=480
for a in "${@:2}"; do
    case $a in
    --quick) quick=1 ;;
    --no-throughput) throughput=0 ;;
    --rounds=*) rounds=${a#--rounds=} ;;
    --tp-steps=*) tp_steps=${a#--tp-steps=} ;;
    --budget=*) budget=${a#--budget=} ;;
    --sgd-steps=*) sgd_opt=${a#--sgd-steps=} ;;
    *) out=$a ;;
    esac
done
src=$(cd "$(dirname "$0")/../.." && pwd)
mw=$build/worker/mwtrain cmp=$build/tests/mpi/cmp_weights
for f in "$mw" "$cmp"; do
    [[ -x $f ]] || { echo "gpu_first_run: $f is missing: BUILDDIR must be a build (or a bundle)" >&2; exit 2; }
done
mkdir -p "$out" || exit 1
report=$out/report.md
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh" # the Open MPI environment (tests/openmpi.env)
read -r -a cpu_extra <<<"${MW_FIRST_RUN_CPU_FLAGS:-}"
failed=0
line() { # line RESULT CHECK DETAIL
    printf '| %s | %s | %s |\n' "$2" "$1" "$3" >>"$report"
    printf '%-4s %s: %s\n' "$1" "$2" "$3"
    [[ $1 != FAIL ]] || failed=1
}

# Which device rank 0 trains on, as mwtrain itself decides (the module's probe, not nvidia-smi).
# Where the host shows a GPU (nvidia-smi lists one, or /dev/nvidia0 exists), not training on it
# is a failure, and --device gpu makes mwtrain say why (the module not loading, a runtime newer
# than the driver, MPI not starting); without one it is a skip with the same reason.
cluster=$(timeout 120 "$mw" cluster --json 2>&1)
dev=$(sed -n 's/.*"rank": 0,.*"device": "\([^"]*\)".*/\1/p' <<<"$cluster")
if [[ $dev != cuda:* ]]; then
    if [[ -z $dev ]]; then # mwtrain itself did not start: its own words are the reason
        why=$(grep -v '^ *[]}{[]*,\?$' <<<"$cluster" | tail -n 3 | tr '\n' ' ')
    else
        why=$(timeout 120 "$mw" cluster --device gpu 2>&1 | grep -iE 'error|cannot|fail|no CUDA' |
            tail -n 2 | tr '\n' ' ')
    fi
    visible=""
    if command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
        visible="nvidia-smi lists $(nvidia-smi -L | grep -c '^GPU ') GPU(s)"
    elif [[ -e /dev/nvidia0 ]]; then
        visible="/dev/nvidia0 exists"
    fi
    if [[ -n $visible ]]; then
        echo "FAIL: $visible, but rank 0 would train on '${dev:-?}': ${why:-no reason given}" >&2
        exit 1
    fi
    echo "SKIP: rank 0 would train on '${dev:-?}', not a CUDA device: ${why:-no reason given}"
    exit 77
fi
range=${dev#cuda:}
ngpu=$((${range#*-} - ${range%-*} + 1))
{
    echo "# First GPU run, $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo
    echo "- mwtrain: $("$mw" --version 2>/dev/null | grep -m 1 "^mwtrain"); rank 0 on $dev ($ngpu GPU(s) for one rank)"
    command -v nvidia-smi >/dev/null &&
        echo "- $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | head -n 1)"
    echo
    echo "| check | result | detail |"
    echo "|---|---|---|"
} >"$report"

# Data: the Debian Fashion-MNIST when it is there, else the bundle's part of it
# (gpu_bundle.sh), else a random set of its shape, on which the loss cannot fall and the
# agreement checks little: then the report says so.
data=() data_dir=""
if [[ -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]]; then
    :
elif [[ -f $build/data/fashion-mnist/train-images-idx3-ubyte.gz ]]; then
    data_dir=$build/data/fashion-mnist
    data=(--data "$data_dir")
else
    python3 - "$out/random-fmnist" <<'PY' || { line FAIL data "numpy could not write a data set"; exit 1; }
import os, sys
import numpy as np
d = sys.argv[1]
os.makedirs(d, exist_ok=True)
g = np.random.default_rng(1234)
for part, n in (("train", 60000), ("test", 10000)):
    np.save(f"{d}/x_{part}.npy", g.integers(0, 256, (n, 28, 28), dtype=np.uint8))
    np.save(f"{d}/y_{part}.npy", g.integers(0, 10, (n,), dtype=np.uint8))
PY
    data=(--data "$out/random-fmnist")
    line SKIP data "no Fashion-MNIST here: a random set of its shape ($out/random-fmnist); the loss stays near ln 10, so the agreement below checks little"
fi

# 1. The CUDA suite (compute-sanitizer comes last, as the slowest: a run cut short by its
# deadline has the answers that matter most).
if ((quick)); then
    line SKIP "meson test --suite cuda" "--quick"
else
    if command -v meson >/dev/null && [[ -d $build/meson-info ]]; then
        meson test -C "$build" --suite cuda --print-errorlogs >"$out/meson-cuda.txt" 2>&1
        rc=$?
        sum=$(grep -E '^(Ok|Fail|Skipped|Timeout):' "$out/meson-cuda.txt" | tr -s ' \n' ' ')
        line "$( ((rc == 0)) && echo PASS || echo FAIL)" "meson test --suite cuda" "exit $rc; $sum"
    else # a bundle (gpu_bundle.sh), or no meson: the kernel tests at least
        line SKIP "meson test --suite cuda" "no meson build directory here; test_cuda alone below"
        timeout 600 "$build/tests/cuda/test_cuda" >"$out/test_cuda.txt" 2>&1
        rc=$?
        sum=$(grep -E '^\[  (PASSED|FAILED|SKIPPED) +\] [0-9]+ test' "$out/test_cuda.txt" | tr -s ' \n' ' ')
        # on a host with a device nothing may skip: a skip means the device was not usable
        if grep -qE '^\[  SKIPPED \] [0-9]+ test' "$out/test_cuda.txt" && ((rc == 0)); then
            rc=1
        fi
        line "$( ((rc == 0)) && echo PASS || echo FAIL)" \
            "test_cuda (every CUDA kernel against the reference)" "exit $rc; $sum"
    fi
fi

# 4. compute-sanitizer memcheck and racecheck on test_cuda.
sanitizers() {
    ((quick)) && { line SKIP compute-sanitizer "--quick"; return; }
    spent compute-sanitizer && return
    local cs tool rc summary res
    cs=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
    if [[ -z $cs ]]; then
        line SKIP compute-sanitizer "compute-sanitizer is not on the PATH nor in /usr/local/cuda/bin"
        return
    fi
    for tool in memcheck racecheck; do
        timeout 900 "$cs" --tool "$tool" --error-exitcode 99 \
            "$build/tests/cuda/test_cuda" >"$out/sanitizer-$tool.txt" 2>&1
        rc=$?
        # judged on the tool's own summary: a failing test or a refused device is not
        # "the sanitizer found errors", and no summary is no answer
        summary=$(grep -E '(ERROR|RACECHECK) SUMMARY' "$out/sanitizer-$tool.txt" | tail -n 1)
        if [[ $summary =~ SUMMARY:\ 0\ (errors|hazards) ]]; then
            res=PASS
        else
            res=FAIL
            [[ -n $summary ]] || summary="no summary: $(grep -v '^=* *$' "$out/sanitizer-$tool.txt" | tail -n 2 | tr '\n' ' ')"
        fi
        line "$res" "compute-sanitizer $tool" "exit $rc; $summary"
    done
}

# 2. GPU against CPU. train NAME RANKS STEPS FLAGS...: one epoch; keeps NAME.out and NAME.bin.
train() {
    local name=$1 n=$2 st=$3
    shift 3
    local launch=(timeout 600)
    ((n > 1)) && launch=(timeout 600 mpirun -n "$n")
    "${launch[@]}" "$mw" train --epochs 1 --steps-per-epoch "$st" --test-examples 2000 \
        --progress none --summary-dir "" --checkpoint-every-epochs 0 --seed 7 "${data[@]}" \
        --dump-weights "$out/$name.bin" "$@" >"$out/$name.out" 2>&1
}
# rel A B: the weights' relative difference (max |a-b| / max |a|, cmp_weights), empty when
# either run left no weights
rel() {
    [[ -s $out/$1.bin && -s $out/$2.bin ]] || return 0
    "$cmp" "$out/$1.bin" "$out/$2.bin" 1 2>/dev/null | sed -n 's/.*relative difference \([0-9.e+-]*\).*/\1/p'
}
# field NAME FIELD: the number after "FIELD: " in NAME's epoch line
field() { sed -n "s/^Epoch 1,\\(.*,\\)\\? $2: \\([0-9.]*\\),.*/\\2/p" "$out/$1.out" | head -n 1; }
le() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a <= b) }'; }
# spent WHAT: past the time budget (--budget, seconds since the script started), WHAT is a SKIP
# line saying so and this returns 0: the later checks give way to the earlier ones
spent() {
    ((budget > 0 && SECONDS >= budget)) || return 1
    line SKIP "$1" "the time budget was spent (--budget=$budget: ${SECONDS} s so far)"
}

# The weights after SGD steps of a CNN with the tutorial's shape and smooth functions
# (tests/bench/smooth_cnn.json: tanh and average pooling where the tutorial has ReLU and max
# pooling). With ReLU and max pooling a rounding difference in a pre-activation near 0, or in
# two near-equal pooled values, sends a gradient elsewhere: on Fashion-MNIST the tutorial CNN's
# first-step gradients differ by 2e-3 between --backend ref and cpu, and Adam grows such flips
# to percents of the weights. Without kinks the runs differ by float32 rounding alone, which
# this check can bound: the longest sum of a step (conv1's kernel gradient, 64 x 26 x 26 =
# 43264 terms) carries a relative error of about sqrt(43264) x 2^-24 = 1.2e-5 when the
# rounding errors add at random, far less for most weights; 50 SGD steps at lr 0.01 do not
# amplify it (measured here: --backend ref, ONEDNN_MAX_CPU_ISA=AVX2 and 2 replicas each
# against the CPU, 2e-7 to 8e-7), so the tolerance is 1e-5 of the weights' largest value. The
# --backend ref run shows it holds for another summation order on this host; the weights move
# 0.6 of their largest value in those steps (against 1 step), so a GPU that computed a wrong
# gradient, or none, fails by orders of magnitude.
smooth=(--model "$src/tests/bench/smooth_cnn.json")
sgd_steps=${sgd_opt:-$( ((quick)) && echo 20 || echo 50)}
sgd=("${smooth[@]}" --optimizer sgd --learning-rate 0.01)
tol=1e-5
cpu=(--device cpu "${cpu_extra[@]}")
# calibrate NAME WHAT FLAGS...: the tolerance checked on the spot for a model: NAME-ref
# (--backend ref) within it of NAME-cal (the CPU) after the SGD steps, and the weights moving
# 1000 times it (NAME-move: one step)
calibrate() {
    local name=$1 what=$2 pid d m
    shift 2
    train "$name-ref" 1 "$sgd_steps" --device cpu --backend ref "$@" &
    pid=$!
    train "$name-cal" 1 "$sgd_steps" --device cpu "$@"
    train "$name-move" 1 1 --device cpu "$@"
    wait "$pid"
    d=$(rel "$name-cal" "$name-ref") m=$(rel "$name-cal" "$name-move")
    if [[ -n $d && -n $m ]] && le "$d" "$tol" && le "$(awk -v t="$tol" 'BEGIN { print 1000 * t }')" "$m"; then
        line PASS "SGD tolerance $tol ($what, $sgd_steps steps)" \
            "--backend ref vs cpu $d; the weights move $m (1 step vs $sgd_steps)"
    else
        line FAIL "SGD tolerance $tol ($what, $sgd_steps steps)" \
            "--backend ref vs cpu ${d:-none}, must be <= $tol; the weights move ${m:-?}, must be >= 1000 x $tol; $(tail -n 1 "$out/$name-ref.out")"
    fi
}
# (the reference backend's runs are compared by their weights: 100 test examples, where its
# evaluation of 2000 took most of its time)
calibrate cal "smooth CNN" "${sgd[@]}" --test-examples 100
# agree GPU-NAME CPU-NAME WHAT: the weights within the tolerance
agree() {
    local d
    d=$(rel "$2" "$1")
    if [[ -z $d ]]; then
        line FAIL "$3" "no weights: $(tail -n 1 "$out/$1.out"); $(tail -n 1 "$out/$2.out")"
    elif le "$d" "$tol"; then
        line PASS "$3" "weights rel diff $d <= $tol; Loss gpu $(field "$1" Loss) cpu $(field "$2" Loss)"
    else
        line FAIL "$3" "weights rel diff $d > $tol; Loss gpu $(field "$1" Loss) cpu $(field "$2" Loss)"
    fi
}
# one rank drives all of its GPUs, a replica each (the default), or two replicas on each
train gpu-1rank 1 "$sgd_steps" --device gpu "${sgd[@]}"
train cpu-1rank 1 "$sgd_steps" "${sgd[@]}" "${cpu[@]}" --replicas-per-worker "$ngpu"
agree gpu-1rank cpu-1rank "SGD, 1 rank on $ngpu GPU(s) vs CPU, $ngpu replica(s)"
train gpu-2per 1 "$sgd_steps" --device gpu "${sgd[@]}" --replicas-per-worker $((2 * ngpu))
train cpu-2per 1 "$sgd_steps" "${sgd[@]}" "${cpu[@]}" --replicas-per-worker $((2 * ngpu))
agree gpu-2per cpu-2per "SGD, 1 rank x 2 replicas per GPU vs CPU, $((2 * ngpu)) replicas"
if ((ngpu >= 2)); then
    # two ranks on two GPUs, a GPU each, whatever else the host has
    two=$(cut -d, -f1-2 <<<"${CUDA_VISIBLE_DEVICES:-$(seq -s, 0 $((ngpu - 1)))}")
    CUDA_VISIBLE_DEVICES=$two train gpu-2x1 2 "$sgd_steps" --device gpu "${sgd[@]}"
    train cpu-2x1 2 "$sgd_steps" "${sgd[@]}" "${cpu[@]}"
    agree gpu-2x1 cpu-2x1 "SGD, mpirun -n 2 on 2 GPUs vs CPU"
    # --overlap-allreduce on: each layer's bucket all-reduced on the reduce stream beside the
    # backward; on 2 GPUs each float's sum is one addition, so the serial path's bits
    CUDA_VISIBLE_DEVICES=$two train gpu-2x1-ov 2 "$sgd_steps" --device gpu "${sgd[@]}" \
        --overlap-allreduce on --bucket-mb 0
    if grep -q "overlapped all-reduce: .* on a reduce stream per GPU" "$out/gpu-2x1-ov.out" &&
        cmp -s "$out/gpu-2x1.bin" "$out/gpu-2x1-ov.bin"; then
        line PASS "--overlap-allreduce on, mpirun -n 2 on 2 GPUs" "the serial path's weights, bitwise"
    else
        line FAIL "--overlap-allreduce on, mpirun -n 2 on 2 GPUs" \
            "weights rel diff $(rel gpu-2x1 gpu-2x1-ov) (want bitwise); $(tail -n 1 "$out/gpu-2x1-ov.out")"
    fi
else
    line SKIP "mpirun -n 2 on 2 GPUs" "one GPU"
    line SKIP "--overlap-allreduce on, mpirun -n 2 on 2 GPUs" "one GPU"
fi
# The tutorial's Adam on the GPU learns as on the CPU: test accuracy after the epoch within 2
# points (rounding moves Adam's weights by percents, its accuracy by tenths of a point).
steps=$( ((quick)) && echo 20 || echo 200)
train gpu-adam 1 "$steps" --device gpu
train cpu-adam 1 "$steps" "${cpu[@]}" --replicas-per-worker "$ngpu"
ga=$(field gpu-adam "Test Accuracy") ca=$(field cpu-adam "Test Accuracy")
if [[ -z $ga || -z $ca ]]; then
    line FAIL "Adam, $steps steps, GPU learns as the CPU" "no epoch line: $(tail -n 1 "$out/gpu-adam.out"); $(tail -n 1 "$out/cpu-adam.out")"
elif [[ ${data[*]} == *random-fmnist* ]]; then
    line SKIP "Adam, $steps steps, GPU learns as the CPU" "random data: test accuracy gpu $ga cpu $ca means nothing"
else
    ok=$(awk -v a="$ga" -v b="$ca" 'BEGIN { d = a - b; if (d < 0) d = -d; print (d <= 2.0) ? 1 : 0 }')
    line "$( ((ok)) && echo PASS || echo FAIL)" "Adam, $steps steps, GPU learns as the CPU" \
        "Test Accuracy gpu $ga cpu $ca; Loss gpu $(field gpu-adam Loss) cpu $(field cpu-adam Loss); weights rel diff $(rel cpu-adam gpu-adam)"
fi

# mixed_bfloat16 on the GPU (bfloat16 values on TF32 and bfloat16 tensor cores) against the
# CPU's (oneDNN's bfloat16 matmul, or --backend ref where this CPU has no bf16 instructions):
# one SGD step of learning rate 1 of the smooth CNN, compared as the update (cmp_weights with
# the initial weights as base, so the update is the gradient). Both round the same float32
# values to bfloat16, so they differ where a value straddles a rounding boundary between two
# summation orders: measured on an AVX-512 host, --backend ref vs cpu 4.9e-5; the tolerance is
# 5e-4. bfloat16 itself moves the update 4.1e-3 from float32 there, so the GPU's update must
# also be at least 2e-3 from the CPU's float32 one (it did round).
bf=(--model "$src/tests/bench/smooth_cnn.json" --optimizer sgd --momentum 0 --learning-rate 1)
bf16_cpu=("${cpu[@]}")
if ! "$mw" train --epochs 0 --dtype-policy mixed_bfloat16 --device cpu --checkpoint-every-epochs 0 \
    --summary-dir "" >/dev/null 2>&1; then
    bf16_cpu+=(--backend ref)
fi
train bf16-w0 1 1 --device cpu "${bf[@]}" --epochs 0
train bf16-gpu 1 1 --device gpu "${bf[@]}" --dtype-policy mixed_bfloat16
train bf16-cpu 1 1 "${bf[@]}" "${bf16_cpu[@]}" --replicas-per-worker "$ngpu" --dtype-policy mixed_bfloat16
train bf16-f32 1 1 "${bf[@]}" "${cpu[@]}" --replicas-per-worker "$ngpu"
upd() { # upd A B: the updates' relative difference from bf16-w0
    [[ -s $out/$1.bin && -s $out/$2.bin && -s $out/bf16-w0.bin ]] || return 0
    "$cmp" "$out/$1.bin" "$out/$2.bin" 1 "$out/bf16-w0.bin" 2>/dev/null |
        sed -n 's/.*relative difference \([0-9.e+-]*\).*/\1/p'
}
# agree16 POLICY TAG WHAT TOL MIN: run TAG-gpu's update within TOL of TAG-cpu's and at least
# MIN from the CPU's float32 one, its start-up line naming POLICY
agree16() {
    local policy=$1 tag=$2 what=$3 tol=$4 min=$5 d16 d32
    d16=$(upd "$tag-gpu" "$tag-cpu") d32=$(upd "$tag-gpu" bf16-f32)
    if [[ -z $d16 || -z $d32 ]]; then
        line FAIL "$what" "no weights: $(tail -n 1 "$out/$tag-gpu.out"); $(tail -n 1 "$out/$tag-cpu.out")"
    elif le "$d16" "$tol" && le "$min" "$d32" && grep -qF "$policy (" "$out/$tag-gpu.out"; then
        line PASS "$what" "update rel diff $d16 <= $tol; from the CPU's float32 update $d32 >= $min"
    else
        line FAIL "$what" "update rel diff $d16 (<= $tol?); from the CPU's float32 update $d32 (>= $min?); $(grep -m 1 "training on" "$out/$tag-gpu.out")"
    fi
}
agree16 mixed_bfloat16 bf16 "mixed_bfloat16, 1 SGD step, GPU vs CPU (${bf16_cpu[*]})" 5e-4 2e-3

# mixed_float16 likewise against the reference backend's (the CPU's fast path refuses it), at
# Keras' default loss scale 2^15: measured on an AVX-512 host, ref with another summation order
# 4.2e-6, the fake GPUs 1.3e-5, and float16 moving the update 2.5e-4 to 4.8e-4 from float32, so
# the GPU's update must be within 1e-4 of the reference's and at least 2e-4 from float32's.
train f16-gpu 1 1 --device gpu "${bf[@]}" --dtype-policy mixed_float16
train f16-cpu 1 1 "${bf[@]}" "${cpu[@]}" --backend ref --test-examples 100 \
    --replicas-per-worker "$ngpu" --dtype-policy mixed_float16
agree16 mixed_float16 f16 "mixed_float16, 1 SGD step, GPU vs CPU (--backend ref)" 1e-4 2e-4

# The token models: a GPT of KerasHub's TransformerDecoder blocks (tests/bench/gpt_data.py:
# Embedding, causal attention, LayerNormalization, the GELU FFN, the loss on every position;
# 2 blocks of width 64, context 32), whose functions have no kinks: its SGD weights after the
# same steps are held to the CNN's tolerance, calibrated the same way on the spot (here: --backend
# ref against cpu 2.9e-7 after 50 steps, the weights moving 0.73). Then the bitwise twin: two
# GPU runs with dropout 0.1 and Adam, on one replica per GPU and on two, must give the same
# bits (deterministic kernels: Embedding's sorted scatter, attention's fixed GEMM order, the
# norms' fixed chunks; dropout's mask a hash of the step and position).
gptd=$out/gpt
if python3 "$src/tests/bench/gpt_data.py" "$gptd" >"$out/gpt-data.out" 2>&1 &&
    python3 "$src/tests/bench/gpt_data.py" "$gptd/drop" --dropout 0.1 >>"$out/gpt-data.out" 2>&1; then
    tok=(--model "$gptd/gpt.json" --data "$gptd/tokens" --batch-per-replica 16 --test-examples 64)
    tsgd=("${tok[@]}" --optimizer sgd --learning-rate 0.1)
    calibrate tok "token GPT" "${tsgd[@]}"
    train tok-gpu 1 "$sgd_steps" --device gpu "${tsgd[@]}"
    train tok-cpu 1 "$sgd_steps" "${tsgd[@]}" "${cpu[@]}" --replicas-per-worker "$ngpu"
    agree tok-gpu tok-cpu "SGD, token GPT, 1 rank on $ngpu GPU(s) vs CPU, $ngpu replica(s)"
    tadam=(--model "$gptd/drop/gpt.json" --data "$gptd/drop/tokens" --batch-per-replica 16
        --test-examples 64 --optimizer adam --learning-rate 0.001 --device gpu)
    for per in 1 2; do
        train "twin$per-a" 1 "$sgd_steps" "${tadam[@]}" --replicas-per-worker $((per * ngpu))
        train "twin$per-b" 1 "$sgd_steps" "${tadam[@]}" --replicas-per-worker $((per * ngpu))
        what="bitwise twin: token GPT, dropout 0.1, Adam, $per replica(s) per GPU, two GPU runs"
        if [[ ! -s $out/twin$per-a.bin || ! -s $out/twin$per-b.bin ]]; then
            line FAIL "$what" "no weights: $(tail -n 1 "$out/twin$per-a.out"); $(tail -n 1 "$out/twin$per-b.out")"
        elif cmp -s "$out/twin$per-a.bin" "$out/twin$per-b.bin"; then
            line PASS "$what" "the same bits; Loss $(field "twin$per-a" Loss)"
        else
            line FAIL "$what" "weights rel diff $(rel "twin$per-a" "twin$per-b") (want bitwise)"
        fi
        # the same run from CUDA graphs: the captured kernels read each step's dropout seed
        # from the device, so the bits are the kernels' one by one
        train "twin$per-g" 1 "$sgd_steps" "${tadam[@]}" --replicas-per-worker $((per * ngpu)) \
            --cuda-graphs on
        what="CUDA graphs: token GPT, dropout 0.1, Adam, $per replica(s) per GPU, on vs off"
        replays=$(sed -n 's/.*: \([0-9]*\) micro-batches replayed from \([0-9]*\) CUDA graphs.*/\1 micro-batches from \2 graphs/p' \
            "$out/twin$per-g.out" | head -n 1)
        if [[ ! -s $out/twin$per-g.bin ]]; then
            line FAIL "$what" "no weights: $(tail -n 1 "$out/twin$per-g.out")"
        elif ! cmp -s "$out/twin$per-a.bin" "$out/twin$per-g.bin"; then
            line FAIL "$what" "weights rel diff $(rel "twin$per-a" "twin$per-g") (want bitwise)"
        elif [[ -z $replays || $replays == "0 "* ]] || grep -qF "CUDA graphs off (" "$out/twin$per-g.out"; then
            line FAIL "$what" "the same bits, but no graph replayed: $(grep -F "CUDA graphs off (" "$out/twin$per-g.out" | head -n 1)${replays:+ ($replays)}"
        else
            line PASS "$what" "the same bits; device 0 replayed $replays"
        fi
    done
else
    line FAIL "token models" "tests/bench/gpt_data.py: $(tail -n 1 "$out/gpt-data.out")"
fi

# Every layer family twice: the models of the Keras gradient checks (tests/data/keras/graph/)
# and the tutorial CNN with Dropout (its MaxPooling2D), which together hold every layer mwtrain
# reads, trained twice on the GPU with Adam (their Dropout, SpatialDropout and attention dropout
# drawing masks), must give the same bits: the determinism of every CUDA kernel a model reaches,
# not only the GPT's. The token classifiers read token ids (tests/bench/gpt_data.py --classes:
# 784 ids below 20, a label each). --quick: four of them (the dry run on fake devices checks the
# lines, not the kernels).
# Run after the GPT table (before the CNN's, which an earlier run measured), or with
# --no-throughput before the sanitizers; past the time budget, one SKIP line.
# the layers of a Keras JSON model, nested models' too, but InputLayer, comma-separated
layer_kinds='import json, sys
def kinds(c):
    out = set()
    for l in c.get("layers", []):
        out.add(l["class_name"])
        out |= kinds(l.get("config", {}))
    return out
print(", ".join(sorted(kinds(json.load(open(sys.argv[1]))["config"]) - {"InputLayer"})))'
family_twins() {
    spent "bitwise twins of every layer family" && return
    local families path f json fam kinds what
    families=(cnn_dropout_k2 graph/gradcheck_k2 graph/gradcheck_misc graph/gradcheck_act
        graph/gradcheck_norm graph/gradcheck_rms graph/gradcheck_se graph/gradcheck_up
        graph/gradcheck_dwconv graph/gradcheck_crop graph/gradcheck_apps graph/gradcheck_vit
        graph/gradcheck_llama graph/gradcheck_gemma graph/gradcheck_mha graph/gradcheck_transformer
        graph/syncbn_k3 graph/gradcheck_tokens graph/gradcheck_tokens_pos graph/gradcheck_tokens_rope
        graph/gradcheck_tokens_tied graph/gradcheck_tokens_untied)
    ((quick)) && families=(graph/gradcheck_k2 graph/gradcheck_vit graph/gradcheck_llama
        graph/gradcheck_tokens_rope)
    if python3 "$src/tests/bench/gpt_data.py" "$out/ids" --context 784 --vocab 20 --examples 128 \
        --classes 10 >>"$out/gpt-data.out" 2>&1; then
        for path in "${families[@]}"; do
            f=${path#graph/} json=$src/tests/data/keras/$path.json
            fam=(--model "$json" --batch-per-replica 8 --test-examples 64 --optimizer adam
                --learning-rate 0.001 --device gpu)
            [[ $f == gradcheck_tokens* ]] && fam+=(--data "$out/ids/ids")
            train "fam-$f-a" 1 3 "${fam[@]}"
            train "fam-$f-b" 1 3 "${fam[@]}"
            kinds=$(python3 -c "$layer_kinds" "$json" 2>/dev/null)
            what="bitwise twin: $f ($kinds), Adam, two GPU runs"
            if [[ ! -s $out/fam-$f-a.bin || ! -s $out/fam-$f-b.bin ]]; then
                line FAIL "$what" "no weights: $(tail -n 1 "$out/fam-$f-a.out"); $(tail -n 1 "$out/fam-$f-b.out")"
            elif cmp -s "$out/fam-$f-a.bin" "$out/fam-$f-b.bin"; then
                line PASS "$what" "the same bits; Loss $(field "fam-$f-a" Loss)"
            else
                line FAIL "$what" "weights rel diff $(rel "fam-$f-a" "fam-$f-b") (want bitwise)"
            fi
        done
    else
        line FAIL "layer families" "tests/bench/gpt_data.py --classes: $(tail -n 1 "$out/gpt-data.out")"
    fi
}

# 3. Throughput, mwtrain and PyTorch alternating, the median of the rounds.
if ((!throughput)); then
    line SKIP throughput "--no-throughput"
    family_twins
    sanitizers
    echo "report: $report"
    exit "$failed"
fi
rounds=${rounds:-$( ((quick)) && echo 1 || echo 3)}
# mwtrain and PyTorch on the same one GPU (a host with more would give mwtrain all of them)
one=${CUDA_VISIBLE_DEVICES:-0}
one=${one%%,*}
peer_ok=0
if python3 -c 'import sys, torch; sys.exit(not torch.cuda.is_available())' 2>/dev/null; then
    peer_ok=1
else
    line SKIP "PyTorch on the GPU" "python3 has no CUDA-enabled torch"
fi
all_set() { # all_set VALUE...: at least one value, none empty
    (($#)) || return 1
    local v
    for v; do [[ -n $v ]] || return 1; done
}
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
# The GPT table: width 768, 12 blocks of 12 heads, ff 3072 (ReLU, as
# tests/bench/peer_torch_lm.py's gpt), context 1024, a byte vocabulary, batch 8 on one GPU, Adam;
# float32 and mixed_bfloat16 (PyTorch: autocast bfloat16), tokens/s of the second epoch (PyTorch:
# the median of its windows) and each program's peak GPU memory as nvidia-smi sees it (sampled
# every 200 ms, less the GPU's use before it started). The goals: at least PyTorch eager's
# tokens/s, and a peak within 1.2x of its; then float32 with --attention-memory recompute (the
# probabilities recomputed in the backward, not stored), against PyTorch's float32 numbers.
# --quick: 2 blocks of width 64, context 32. Then each
# mode's step profile (its phases from the first round's timeline, tests/bench/trace_phases.py)
# and, where Nsight Systems is installed, 5 float32 steps under nsys (the kernels' table).
read -r gb gw gh gf gt <<<"12 768 12 3072 1024"
((quick)) && read -r gb gw gh gf gt <<<"2 64 4 128 32"
gpt_shape=(--blocks "$gb" --width "$gw" --heads "$gh" --ff "$gf" --vocab 256)
gper=${tp_steps:-$( ((quick)) && echo 10 || echo 20)}
((gper > 20)) && gper=20
gpu_used() { nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i "$one" 2>/dev/null | head -n 1; }
# sampled FILE CMD...: CMD's exit status; FILE: the GPU's used MiB every 200 ms while it ran
sampled() {
    local f=$1 sp="" rc
    shift
    : >"$f"
    if command -v nvidia-smi >/dev/null; then
        nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i "$one" -lms 200 >"$f" 2>/dev/null &
        sp=$!
    fi
    "$@"
    rc=$?
    [[ -z $sp ]] || { kill "$sp" 2>/dev/null; wait "$sp" 2>/dev/null; }
    return $rc
}
peak() { # peak FILE BASE: the largest sample less BASE, empty without samples
    [[ -s $1 && -n $2 ]] && sort -g "$1" | tail -n 1 | awk -v b="$2" '{ print $1 - b }'
}
if python3 "$src/tests/bench/gpt_data.py" "$gptd/big" "${gpt_shape[@]}" --context "$gt" --activation relu \
    --examples $((8 * (gper + 1))) >>"$out/gpt-data.out" 2>&1; then
    torch_fp32=() # PyTorch's float32 numbers, for the recompute line: tokens/s, peak MiB
    for mode in fp32 bf16 rc; do
        mwf=() ptf=() label=", float32" peer=$peer_ok
        [[ $mode == bf16 ]] && mwf=(--dtype-policy mixed_bfloat16) ptf=(--bf16) label=", mixed_bfloat16"
        # the probabilities recomputed in the backward: the memory goal's other side
        [[ $mode == rc ]] && mwf=(--attention-memory recompute) peer=0 \
            label=", float32, --attention-memory recompute"
        spent "GPT of $gb blocks of width $gw, context $gt, batch 8$label" && continue
        mws=() pts=() mmem=() pmem=()
        for ((r = 1; r <= rounds; r++)); do
            base=$(gpu_used)
            CUDA_VISIBLE_DEVICES=$one sampled "$out/gpt-$mode-$r.mem" timeout 600 "$mw" train --device gpu \
                --model "$gptd/big/gpt.json" --data "$gptd/big/tokens" --epochs 2 --steps-per-epoch "$gper" \
                --batch-per-replica 8 --optimizer adam --learning-rate 0.001 --test-examples 8 "${mwf[@]}" \
                --progress none --summary-dir "" --checkpoint-every-epochs 0 \
                --timeline "$out/gpt-$mode-$r.trace.json" >"$out/gpt-$mode-$r.out" 2>&1
            mws+=("$(sed -n 's/^Epoch 2,.*Tokens\/s: \([0-9.]*\).*/\1/p' "$out/gpt-$mode-$r.out")")
            mmem+=("$(peak "$out/gpt-$mode-$r.mem" "$base")")
            if ((peer)); then
                base=$(gpu_used)
                CUDA_VISIBLE_DEVICES=$one sampled "$out/torch-gpt-$mode-$r.mem" timeout 600 python3 \
                    "$src/tests/bench/peer_torch_lm.py" "$gptd/big/tokens" --model gpt --device cuda "${ptf[@]}" \
                    --batch 8 --steps $((gper < 10 ? 10 : gper)) --warmup 3 "${gpt_shape[@]}" \
                    >"$out/torch-gpt-$mode-$r.out" 2>&1
                pts+=("$(sed -n 's/.*tokens_per_sec=\([0-9.]*\).*/\1/p' "$out/torch-gpt-$mode-$r.out")")
                pmem+=("$(peak "$out/torch-gpt-$mode-$r.mem" "$base")")
            fi
        done
        what="GPT of $gb blocks of width $gw, context $gt, batch 8$label"
        if ! all_set "${mws[@]}"; then
            line FAIL "$what" "no epoch 2 line: $(tail -n 1 "$out/gpt-$mode-1.out")"
            continue
        fi
        m=$(median "${mws[@]}") detail="mwtrain $m tokens/s (rounds: ${mws[*]})"
        mm="" pm=""
        all_set "${mmem[@]}" && mm=$(median "${mmem[@]}") && detail+=", peak $mm MiB"
        if [[ $mode == rc && ${#torch_fp32[@]} -eq 2 ]]; then # against PyTorch's float32 run
            detail+="; PyTorch float32 ${torch_fp32[0]}: ratio $(awk -v a="$m" -v b="${torch_fp32[0]}" 'BEGIN { printf "%.2f", a / b }')x"
            [[ -n $mm && -n ${torch_fp32[1]} ]] &&
                detail+="; its peak ${torch_fp32[1]} MiB, mwtrain's $(awk -v a="$mm" -v b="${torch_fp32[1]}" 'BEGIN { printf "%.2f", b > 0 ? a / b : 0 }')x (goal <= 1.2)"
        elif ((peer)) && all_set "${pts[@]}"; then
            p=$(median "${pts[@]}")
            detail+="; PyTorch $p (rounds: ${pts[*]}); ratio $(awk -v a="$m" -v b="$p" 'BEGIN { printf "%.2f", a / b }')x (goal >= 1)"
            if all_set "${pmem[@]}" && all_set "${mmem[@]}"; then
                pm=$(median "${pmem[@]}")
                detail+="; PyTorch peak $pm MiB, mwtrain's $(awk -v a="$mm" -v b="$pm" 'BEGIN { printf "%.2f", b > 0 ? a / b : 0 }')x (goal <= 1.2)"
            fi
            [[ $mode == fp32 ]] && torch_fp32=("$p" "${pm:-}")
        elif ((peer)); then
            detail+="; PyTorch gave no number in a round (rounds: ${pts[*]}): $(tail -n 1 "$out/torch-gpt-$mode-$rounds.out")"
        fi
        line PASS "$what" "$detail"
        # the step's profile: its phases in the first round's second epoch (the timeline)
        if prof=$(python3 "$src/tests/bench/trace_phases.py" "$out/gpt-$mode-1.trace.json" "$gper" 2>&1); then
            line PASS "GPT step profile$label" "$prof (gpt-$mode-1.trace.json: Perfetto opens it)"
        else
            line FAIL "GPT step profile$label" "$(tail -n 1 <<<"$prof")"
        fi
    done
    # where the float32 step's GPU time goes, kernel by kernel, where Nsight Systems is here
    nsys=$(command -v nsys || ls /usr/local/cuda/bin/nsys 2>/dev/null || true)
    if ((quick)) || [[ -z $nsys ]]; then
        line SKIP "GPT kernels (nsys)" "$( ((quick)) && echo "--quick" || echo "nsys is not on the PATH nor in /usr/local/cuda/bin")"
    elif ! spent "GPT kernels (nsys)"; then
        CUDA_VISIBLE_DEVICES=$one timeout 300 "$nsys" profile --stats=true --force-overwrite=true \
            -o "$out/gpt-nsys" "$mw" train --device gpu --model "$gptd/big/gpt.json" \
            --data "$gptd/big/tokens" --epochs 1 --steps-per-epoch 5 --batch-per-replica 8 \
            --optimizer adam --learning-rate 0.001 --test-examples 8 --progress none --summary-dir "" \
            --checkpoint-every-epochs 0 >"$out/gpt-nsys.txt" 2>&1
        rc=$?
        line "$( ((rc == 0)) && echo PASS || echo FAIL)" "GPT kernels (nsys)" \
            "exit $rc; 5 float32 steps; the kernels' table in gpt-nsys.txt, the report gpt-nsys.nsys-rep"
    fi
else
    line FAIL "GPT throughput" "tests/bench/gpt_data.py: $(tail -n 1 "$out/gpt-data.out")"
fi

family_twins
for b in 64 1024; do
    modes=(fp32 tf32 bf16 f16)
    ((b == 64)) && modes+=(cg) # CUDA graphs where the kernels are small and many
    for mode in "${modes[@]}"; do
        case $mode in # mwtrain's flags, PyTorch's, the report's words, the start-up line's
        fp32) mwf=() ptf=() label="" says="" ;;
        tf32) mwf=(--tf32) ptf=(--tf32) label=", --tf32" says="TF32 tensor-core math (--tf32)" ;;
        bf16) mwf=(--dtype-policy mixed_bfloat16) ptf=(--bf16) label=", mixed_bfloat16 (PyTorch: autocast bfloat16)"
            says="mixed_bfloat16 (" ;;
        f16) mwf=(--dtype-policy mixed_float16) ptf=(--f16) label=", mixed_float16 (PyTorch: autocast float16, GradScaler)"
            says="mixed_float16 (" ;;
        cg) mwf=(--cuda-graphs on) ptf=() label=", --cuda-graphs on" says="CUDA graphs on: " ;;
        esac
        spent "throughput, batch $b per replica$label" && continue
        per=$((60000 / b)) mws=() pts=() name="b$b-$mode"
        cap=${tp_steps:-$( ((quick)) && echo 10 || echo 300)}
        ((per > cap)) && per=$cap
        for ((r = 1; r <= rounds; r++)); do
            CUDA_VISIBLE_DEVICES=$one timeout 600 "$mw" train --device gpu --epochs 2 --steps-per-epoch "$per" --batch-per-replica "$b" \
                "${mwf[@]}" --progress none --summary-dir "" --checkpoint-every-epochs 0 "${data[@]}" \
                --test-examples 1000 \
                >"$out/tp-$name-$r.out" 2>&1
            mws+=("$(sed -n 's/^Epoch 2,.*Images\/s: \([0-9.]*\).*/\1/p' "$out/tp-$name-$r.out")")
            if ((peer_ok)); then
                CUDA_VISIBLE_DEVICES=$one timeout 600 python3 "$src/tests/bench/peer_torch.py" --device cuda --batch "$b" "${ptf[@]}" \
                    ${data_dir:+--data-dir "$data_dir"} \
                    --steps "$per" >"$out/torch-$name-$r.out" 2>&1
                pts+=("$(sed -n 's/.*images_per_sec=\([0-9.]*\).*/\1/p' "$out/torch-$name-$r.out")")
            fi
        done
        if ! all_set "${mws[@]}"; then
            line FAIL "throughput, batch $b$label" \
                "no epoch 2 line: $(tail -n 1 "$out/tp-$name-1.out")"
            continue
        fi
        m=$(median "${mws[@]}") detail="mwtrain $m images/s (rounds: ${mws[*]})"
        if [[ -n $says ]] && ! grep -qF "$says" "$out/tp-$name-1.out"; then
            line FAIL "throughput, batch $b$label" "the start-up line does not say '$says'"
            continue
        fi
        if ((peer_ok)) && all_set "${pts[@]}"; then
            p=$(median "${pts[@]}")
            detail+="; PyTorch $p (rounds: ${pts[*]}); ratio $(awk -v a="$m" -v b="$p" 'BEGIN { printf "%.2f", a / b }')x"
        elif ((peer_ok)); then # say why there is no ratio rather than leave it out
            detail+="; PyTorch gave no number in a round (rounds: ${pts[*]}): $(tail -n 1 "$out/torch-$name-$rounds.out")"
        fi
        [[ $mode == fp32 ]] && fp32_m=$m
        [[ $mode == cg && -n ${fp32_m:-} ]] &&
            detail+="; against float32 without graphs $(awk -v a="$m" -v b="$fp32_m" 'BEGIN { printf "%.2f", a / b }')x"
        line PASS "throughput, batch $b per replica$label" "$detail"
    done
done
sanitizers
echo "report: $report"
exit "$failed"
