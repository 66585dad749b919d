#!/usr/bin/env bash
# --device on a machine without a CUDA device: auto trains on the CPU and says why (an info
# line: having no GPU is normal); gpu is one clear error with the device exit code (7).
# Skipped (77) where a device exists, decided by what `mwtrain cluster --json` says rank 0
# would train on: there the fallback is not what runs.
#   test_device_fallback.sh MWTRAIN
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
mw=$1
unset MW_CUDA_MODULE
dev=$("$mw" cluster --json 2>/dev/null | python3 -c 'import json, sys
print(json.load(sys.stdin)["ranks"][0]["device"])') || {
    echo "FAIL: mwtrain cluster --json did not give rank 0's device"
    exit 1
}
if [[ $dev != cpu ]]; then
    echo "SKIP: rank 0 would train on $dev: the no-device fallback does not apply here"
    exit 77
fi
quick=(--epochs 1 --steps-per-epoch 2 --test-examples 50 --checkpoint-every-epochs 0
       --summary-dir "" --progress none)
out=$("$mw" train --device auto "${quick[@]}" 2>&1)
rc=$?
check '[[ $rc -eq 0 ]] && grep -q "^Epoch 1," <<<"$out"' "--device auto trains"
re='info: (no CUDA device \((no CUDA driver: |cuInit: |cuDeviceGetCount).*\)|built without CUDA.*)'
check 'grep -Eq "$re: training on the CPU" <<<"$out" && ! grep -q warning <<<"$out"' \
    "--device auto says, as information, that it trains on the CPU and why: $out"
out=$("$mw" train --device gpu "${quick[@]}" 2>&1)
rc=$?
check '[[ $rc -eq 7 ]]' "--device gpu without a device: exit 7 (got $rc)"
check 'grep -q "mwtrain: error: --device gpu: no CUDA device is available" <<<"$out"' \
    "--device gpu: the message: $out"
check '! grep -q "^Epoch" <<<"$out"' "--device gpu does not train"
out=$("$mw" train --device tpu "${quick[@]}" 2>&1)
rc=$?
check '[[ $rc -eq 2 ]] && grep -q "\-\-device .tpu.: expected one of auto, cpu, gpu" <<<"$out"' \
    "--device tpu: bad value"
finish
