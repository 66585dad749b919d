#!/usr/bin/env bash
# README command 2: set up, build (warnings are errors), and run every test
# suite (unit, headers, cuda, mpi, ...), then a short bounded libFuzzer run of
# the TF_CONFIG, checkpoint and Keras readers, the unit suite under ASan + UBSan,
# and the build without CUDA.
# Extra arguments go to `meson test` (e.g. --suite unit).
# Ends with one line: "tests: N passed, N failed, N skipped".
set -euo pipefail
MW_BUILD=${MW_BUILD:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/build-test}
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
bash "$MW_ROOT/deploy/setup.sh"
mw_build -Dwerror=true -Dbuildtype=debugoptimized

set +e
meson test -C "$MW_BUILD" --print-errorlogs --num-processes 2 "$@" 2>&1 | tee "$MW_BUILD/test-output.txt"
meson_rc=${PIPESTATUS[0]}
count() { sed -n "s/^$1: *\([0-9]*\).*/\1/p" "$MW_BUILD/test-output.txt" | tail -n 1; }
ok=$(count Ok) fail=$(count Fail) skip=$(count Skipped) timeouts=$(count Timeout)
ok=${ok:-0} fail=$((${fail:-0} + ${timeouts:-0})) skip=${skip:-0}
((meson_rc != 0 && fail == 0)) && fail=1 # a build or harness failure counts too

echo "fuzz: TF_CONFIG parser, ${MW_FUZZ_SECONDS:-20} s"
if bash "$MW_ROOT/tests/fuzz/run.sh" "${MW_FUZZ_SECONDS:-20}"; then
    ok=$((ok + 1))
else
    fail=$((fail + 1))
fi
echo "sanitizers: the unit suite under ASan + UBSan"
if bash "$MW_ROOT/tests/sanitize/unit_asan.sh" "$MW_BUILD-asan"; then
    ok=$((ok + 1))
else
    fail=$((fail + 1))
fi
echo "no-CUDA build: -Dcuda=disabled compiles and falls back"
if bash "$MW_ROOT/tests/cuda/test_nocuda_build.sh" "$MW_BUILD-nocuda"; then
    ok=$((ok + 1))
else
    fail=$((fail + 1))
fi
echo "tests: $ok passed, $fail failed, $skip skipped"
((fail == 0))
