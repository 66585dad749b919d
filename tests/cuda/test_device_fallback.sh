#!/usr/bin/env bash
# --device on a machine without a CUDA device: auto trains on the CPU and says
# why; gpu is one clear error with the device exit code (7). Skipped (77) where
# a device exists: there the fallback is not what runs.
#   test_device_fallback.sh MWTRAIN
set -uo pipefail
mw=$1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
quick=(--epochs 1 --steps-per-epoch 2 --test-examples 50 --checkpoint-every-epochs 0
       --summary-dir "" --progress none)
out=$("$mw" train --device auto "${quick[@]}" 2>&1)
rc=$?
if grep -q "CUDA devices found" <<<"$out"; then
    echo "a CUDA device is present: the no-device fallback does not apply here"
    exit 77
fi
pass=0 fail=0
check() { if eval "$1"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $2"; fi; }
check '[[ $rc -eq 0 ]] && grep -q "^Epoch 1," <<<"$out"' "--device auto trains"
check 'grep -Eq "info: (no CUDA device \(cudaGetDeviceCount: .*\)|built without CUDA.*): training on the CPU" <<<"$out"' \
    "--device auto says it trains on the CPU and why"
out=$("$mw" train --device gpu "${quick[@]}" 2>&1)
rc=$?
check '[[ $rc -eq 7 ]]' "--device gpu without a device: exit 7 (got $rc)"
check 'grep -q "mwtrain: error: --device gpu: no CUDA device is available" <<<"$out"' \
    "--device gpu: the message"
check '! grep -q "^Epoch" <<<"$out"' "--device gpu does not train"
out=$("$mw" train --device tpu "${quick[@]}" 2>&1)
check '[[ $? -eq 2 ]] && grep -q "\-\-device .tpu.: expected one of auto, cpu, gpu" <<<"$out"' \
    "--device tpu: bad value"
echo "$pass passed, $fail failed"
((fail == 0))
