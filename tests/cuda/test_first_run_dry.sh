#!/usr/bin/env bash
# The dry run of tests/bench/gpu_first_run.sh (the first GPU run's list in one command) on fake
# devices: mwtrain opens the hostdev module (tests/hostdev.c) as it opens mwtrain-cuda.so, so
# every command of the script runs, and what it parses and decides is checked here, before a
# GPU host spends its time on it. Asserted:
#   - on 2 fake GPUs, --quick (5 SGD steps: the weights move 0.022, twice what the calibration
#     needs; 1 step per throughput epoch): exit 0; the SGD tolerance is measured (ref vs cpu)
#     and can fail;
#     the three GPU-vs-CPU weight agreements and the Adam accuracy check PASS with their numbers;
#     the token GPT's tolerance is measured, its agreement PASSes, its two bitwise twins (one
#     and two replicas per GPU) PASS and so do its two runs with --cuda-graphs on (the same
#     bits, graphs replayed), four Keras gradient-check models (--quick's share of every layer
#     family) PASS their bitwise twins, and the GPT table's three lines (float32, mixed_bfloat16,
#     float32 with --attention-memory recompute) PASS with a tokens/s figure, each with its step
#     profile from the timeline;
#     mixed_bfloat16's and mixed_float16's updates on the GPU agree with the CPU's and not with
#     float32's; nine throughput lines (64 and 1024 per replica; FP32, --tf32, mixed_bfloat16
#     and mixed_float16; at 64, --cuda-graphs on with its ratio to FP32) PASS with an
#     images/s figure; the steps that need a real GPU (meson's cuda suite, compute-sanitizer,
#     PyTorch on CUDA) are SKIP lines with the reason, never PASS;
#   - a negative control (the CPU side at another learning rate): the agreements FAIL (the
#     token GPT's and the 16-bit ones too), exit 1; run with --budget=1, its 12 throughput lines
#     (9 CNN, 3 GPT) and the layer families' twins are SKIP lines saying the time budget was
#     spent;
#   - no device: exit 77 and one SKIP line naming what rank 0 would train on and why;
#   - a device that mwtrain cannot use while the host shows one (a fake /dev/nvidia0 is not
#     available here; a fake nvidia-smi on the PATH listing a GPU): exit 1, FAIL with the reason;
#   - a BUILDDIR without mwtrain: exit 2 and one message naming the missing file.
#   test_first_run_dry.sh SCRIPT BUILDDIR HOSTDEV_MODULE
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
script=$1 build=$2 module=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export MW_CUDA_MODULE=$module
unset TF_CONFIG MW_HOSTDEV_FAULT MW_FIRST_RUN_CPU_FLAGS

MW_HOSTDEV_GPUS=2 bash "$script" "$build" "$tmp/ok" --quick --tp-steps=1 --sgd-steps=5 \
    >"$tmp/ok.out" 2>&1
rc=$?
r=$tmp/ok/report.md
cat "$tmp/ok.out"
check '[[ $rc -eq 0 ]]' "2 fake GPUs: exit $rc"
check 'grep -qE "^\| SGD tolerance 1e-5 \(smooth CNN, 5 steps\) \| PASS \| --backend ref vs cpu [0-9.e-]+; the weights move [0-9.e-]+ \(1 step vs 5\)" "$r"' \
    "the tolerance is measured, with power: $(grep "SGD tolerance" "$r")"
check '[[ $(grep -cE "^\| SGD, .* \| PASS \| weights rel diff [0-9.e-]+ <= [0-9.e-]+; Loss gpu [0-9.]+ cpu [0-9.]+" "$r") -eq 4 ]]' \
    "four GPU-vs-CPU agreements pass: $(grep "SGD" "$r")"
check 'grep -qE "^\| SGD tolerance 1e-5 \(token GPT, 5 steps\) \| PASS \| --backend ref vs cpu [0-9.e-]+; the weights move [0-9.e-]+ \(1 step vs 5\)" "$r" &&
       grep -qF "| SGD, token GPT, 1 rank on 2 GPU(s) vs CPU, 2 replica(s) | PASS |" "$r"' \
    "the token GPT: its tolerance measured, its agreement: $(grep "token GPT" "$r")"
check '[[ $(grep -cE "^\| bitwise twin: token GPT, dropout 0.1, Adam, [12] replica\(s\) per GPU, two GPU runs \| PASS \| the same bits; Loss [0-9.]+" "$r") -eq 2 ]]' \
    "the bitwise twins: $(grep "twin" "$r")"
check '[[ $(grep -cE "^\| CUDA graphs: token GPT, dropout 0.1, Adam, [12] replica\(s\) per GPU, on vs off \| PASS \| the same bits; device 0 replayed [1-9][0-9]* micro-batches from [1-9][0-9]* graphs" "$r") -eq 2 ]]' \
    "the GPT from CUDA graphs: $(grep "CUDA graphs" "$r")"
check '[[ $(grep -cE "^\| bitwise twin: (gradcheck_k2|gradcheck_vit|gradcheck_llama|gradcheck_tokens_rope) \([A-Za-z0-9, ]+\), Adam, two GPU runs \| PASS \| the same bits; Loss [0-9.]+" "$r") -eq 4 ]] &&
       grep -qE "^\| bitwise twin: gradcheck_k2 \(.*BatchNormalization.*Dropout.*\)" "$r"' \
    "the layer families twice (--quick: four models), their layers named: $(grep "gradcheck" "$r")"
check '[[ $(grep -cE "^\| GPT of 2 blocks of width 64, context 32, batch 8, (float32|mixed_bfloat16|float32, --attention-memory recompute) \| PASS \| mwtrain [0-9.]+ tokens/s" "$r") -eq 3 ]]' \
    "the GPT table's three lines (the fake GPUs: no memory figure): $(grep "GPT of" "$r")"
check '[[ $(grep -cE "^\| GPT step profile, (float32|mixed_bfloat16|float32, --attention-memory recompute) \| PASS \| step [0-9.]+ ms: forward/backward [0-9.]+, data [0-9.]+, all-reduce [0-9.]+, update [0-9.]+ \(median of 1 steps from step 1\)" "$r") -eq 3 ]] &&
       grep -qF "| GPT kernels (nsys) | SKIP | --quick |" "$r"' \
    "the GPT step profiles from the timeline, nsys skipped: $(grep -E "GPT step|nsys" "$r")"
check 'grep -qF "| SGD, 1 rank on 2 GPU(s) vs CPU, 2 replica(s) | PASS |" "$r" &&
       grep -qF "| SGD, 1 rank x 2 replicas per GPU vs CPU, 4 replicas | PASS |" "$r" &&
       grep -qF "| SGD, mpirun -n 2 on 2 GPUs vs CPU | PASS |" "$r"' "the layouts: $(grep "SGD, " "$r")"
check 'grep -qE "^\| Adam, 20 steps, GPU learns as the CPU \| PASS \| Test Accuracy gpu [0-9.]+ cpu [0-9.]+" "$r"' \
    "the Adam epoch: $(grep "Adam" "$r")"
check 'grep -qE "^\| mixed_bfloat16, 1 SGD step, GPU vs CPU \(--device cpu( --backend ref)?\) \| PASS \| update rel diff [0-9.e-]+ <= 5e-4; from the CPU.s float32 update [0-9.e-]+ >= 2e-3" "$r"' \
    "mixed_bfloat16 on the GPU: $(grep mixed_bfloat16 "$r" | head -n 1)"
check 'grep -qE "^\| mixed_float16, 1 SGD step, GPU vs CPU \(--backend ref\) \| PASS \| update rel diff [0-9.e-]+ <= 1e-4; from the CPU.s float32 update [0-9.e-]+ >= 2e-4" "$r"' \
    "mixed_float16 on the GPU: $(grep mixed_float16 "$r" | head -n 1)"
check '[[ $(grep -cE "^\| throughput, batch (64|1024) per replica(, --tf32|, mixed_bfloat16 \(PyTorch: autocast bfloat16\)|, mixed_float16 \(PyTorch: autocast float16, GradScaler\))? \| PASS \| mwtrain [0-9.]+ images/s" "$r") -eq 8 ]] &&
       grep -qE "^\| throughput, batch 64 per replica, --cuda-graphs on \| PASS \| mwtrain [0-9.]+ images/s .*; against float32 without graphs [0-9.]+x" "$r"' \
    "nine throughput lines: $(grep throughput "$r")"
check 'grep -qF "| meson test --suite cuda | SKIP | --quick |" "$r" &&
       grep -qF "| compute-sanitizer | SKIP | --quick |" "$r" &&
       grep -qE "^\| PyTorch on the GPU \| SKIP \| python3 has no CUDA-enabled torch \|" "$r"' \
    "what needs a real GPU is SKIP: $(grep SKIP "$r")"

MW_HOSTDEV_GPUS=2 MW_FIRST_RUN_CPU_FLAGS="--learning-rate 0.011" \
    bash "$script" "$build" "$tmp/neg" --quick --budget=1 --sgd-steps=2 >"$tmp/neg.out" 2>&1
rc=$?
check '[[ $rc -eq 1 && $(grep -c "^| SGD, .* | FAIL | weights rel diff" "$tmp/neg/report.md") -eq 4 ]]' \
    "negative control: exit $rc, $(grep "SGD, " "$tmp/neg/report.md")"
check 'grep -qE "^\| mixed_bfloat16, 1 SGD step, GPU vs CPU .* \| FAIL \| update rel diff" "$tmp/neg/report.md"' \
    "negative control, mixed_bfloat16: $(grep mixed_bfloat16 "$tmp/neg/report.md")"
check 'grep -qE "^\| mixed_float16, 1 SGD step, GPU vs CPU .* \| FAIL \| update rel diff" "$tmp/neg/report.md"' \
    "negative control, mixed_float16: $(grep mixed_float16 "$tmp/neg/report.md")"
check '[[ $(grep -cE "^\| (throughput, batch (64|1024) per replica.*|GPT of .*) \| SKIP \| the time budget was spent \(--budget=1: [0-9]+ s so far\)" "$tmp/neg/report.md") -eq 12 ]] &&
       ! grep -qE "^\| (throughput|GPT of).* \| PASS" "$tmp/neg/report.md"' \
    "--budget=1: the 9 CNN and 3 GPT throughput lines are SKIP, past the budget: $(grep -c "time budget" "$tmp/neg/report.md") lines"
check 'grep -qE "^\| bitwise twins of every layer family \| SKIP \| the time budget was spent" "$tmp/neg/report.md" &&
       ! grep -qF "| bitwise twin: gradcheck" "$tmp/neg/report.md"' \
    "--budget=1: the layer families' twins are one SKIP line: $(grep "layer famil" "$tmp/neg/report.md")"

MW_HOSTDEV_GPUS=0 bash "$script" "$build" "$tmp/none" --quick >"$tmp/none.out" 2>&1
rc=$?
check '[[ $rc -eq 77 ]] && grep -qF "SKIP: rank 0 would train on '"'"'cpu'"'"', not a CUDA device" "$tmp/none.out"' \
    "no device: exit $rc: $(cat "$tmp/none.out")"
mkdir -p "$tmp/bin"
printf '#!/bin/sh\necho "GPU 0: NVIDIA Fake (UUID: GPU-0)"\n' >"$tmp/bin/nvidia-smi"
chmod +x "$tmp/bin/nvidia-smi"
PATH=$tmp/bin:$PATH MW_HOSTDEV_GPUS=0 bash "$script" "$build" "$tmp/unused" --quick >"$tmp/unused.out" 2>&1
rc=$?
check '[[ $rc -eq 1 ]] && grep -qF "FAIL: nvidia-smi lists 1 GPU(s), but rank 0 would train on '"'"'cpu'"'"': mwtrain: error: --device gpu: no CUDA device is available (cudaGetDeviceCount found 0 devices (host stand-in, MW_HOSTDEV_GPUS unset))" "$tmp/unused.out"' \
    "a visible GPU left unused: exit $rc: $(cat "$tmp/unused.out")"
out=$(bash "$script" "$tmp/nowhere" "$tmp/x" 2>&1)
rc=$?
check '[[ $rc -eq 2 ]] && grep -qF "gpu_first_run: $tmp/nowhere/worker/mwtrain is missing: BUILDDIR must be a build (or a bundle)" <<<"$out"' \
    "a BUILDDIR without mwtrain: exit $rc: $out"
finish
