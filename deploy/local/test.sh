#!/usr/bin/env bash
# README command 2: set up, build (warnings are errors), and run every test
# suite (unit, headers, cuda, mpi, ...); on a host where oneDNN uses more than
# AVX2, the suite 'isa' (the tests whose numbers depend on oneDNN's kernels:
# cross-layout and stored-file comparisons, fast path against reference) a second
# time under ONEDNN_MAX_CPU_ISA=AVX2, so both kernel sets pass; then a short
# bounded libFuzzer run of the TF_CONFIG, checkpoint and Keras readers, the unit
# suite under ASan + UBSan, and the build without CUDA.
# Extra arguments go to `meson test` (e.g. --suite unit); with them there is no
# AVX2 pass.
# Ends with each failed test's name and the end of its output (tests/failures.py), then one
# line: "tests: N passed, N failed, N skipped".
set -euo pipefail
MW_BUILD=${MW_BUILD:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/build-test}
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
bash "$MW_ROOT/deploy/setup.sh"
[[ -f $MW_BUILD/build.ninja ]] || meson setup "$MW_BUILD" "$MW_ROOT" -Dwerror=true \
    -Dbuildtype=debugoptimized
idle=(nice -n 19)
chrt --idle 0 true 2>/dev/null && idle=(chrt --idle 0)
# the Keras oracle's venv (tests/keras/venv.sh: pip, mostly waiting on the network and the disk)
# is made while the build compiles; the suite 'keras' waits on its lock, and says why it skips
# when it could not be made. Then, for the whole run (no meson arguments), the TensorFlow venv
# of the image and TFRecord tests (tests/bench/tf_venv.sh), on the CPU the build and the suites
# leave idle: made by the first test that needed it, it held that test's slot for about a
# minute late in the run.
(
    bash "$MW_ROOT/tests/keras/venv.sh" "$MW_BUILD"
    if (($# == 0)); then "${idle[@]}" bash "$MW_ROOT/tests/bench/tf_venv.sh" "$MW_BUILD"; fi
) >"$MW_BUILD/venv-output.txt" 2>&1 &
mw_build -Dwerror=true -Dbuildtype=debugoptimized
# The checks after the suites build their own binaries (the fuzz targets, the unit suite under
# ASan + UBSan, the build without CUDA): those compile meanwhile under SCHED_IDLE (nice 19
# where chrt cannot set it, as `idle` above), on the CPU the suites leave idle (their deadline
# and signal tests mostly wait), and the runs below find them made (a build that failed here
# fails again there, with its message).
(
    "${idle[@]}" env FUZZ_OUT="$MW_BUILD-fuzz" FUZZ_STAGE=build bash "$MW_ROOT/tests/fuzz/run.sh" ||
        true
    "${idle[@]}" env MW_STAGE=build bash "$MW_ROOT/tests/sanitize/unit_asan.sh" "$MW_BUILD-asan" ||
        true
    "${idle[@]}" env MW_STAGE=build bash "$MW_ROOT/tests/cuda/test_nocuda_build.sh" \
        "$MW_BUILD-nocuda" || true
) >"$MW_BUILD/prebuild-output.txt" 2>&1 &
prebuild=$!

# meson runs every test in the build directory, so a test that trains with checkpoints and no
# --checkpoint-dir of its own would use ./training_checkpoints there, and take its lock: two such
# tests at once, and one fails by chance. A file in its place makes any such test fail every time,
# with mwtrain's message. A directory there that holds more than a lock file (someone trained
# from the build directory) is kept, and the guard is off for this run.
ck=$MW_BUILD/training_checkpoints
if [[ -d $ck && ! -L $ck ]]; then
    rm -f "$ck/.mwtrain.lock"
    rmdir "$ck" 2>/dev/null ||
        echo "note: $ck holds files, kept; tests that use the default --checkpoint-dir go unnoticed"
fi
[[ -e $ck || -L $ck ]] || echo "not a directory: tests give mwtrain their own --checkpoint-dir" >"$ck"
# the AVX2 pass's log of an earlier run, which tests/failures.py would read below
rm -f "$MW_BUILD/meson-logs/testlog-avx2.json"

set +e
failed_checks=""
meson test -C "$MW_BUILD" --print-errorlogs --num-processes 2 "$@" 2>&1 | tee "$MW_BUILD/test-output.txt"
meson_rc=${PIPESTATUS[0]}
count() { sed -n "s/^$1: *\([0-9]*\).*/\1/p" "$MW_BUILD/test-output.txt" | tail -n 1; }
ok=$(count Ok) fail=$(count Fail) skip=$(count Skipped) timeouts=$(count Timeout)
ok=${ok:-0} fail=$((${fail:-0} + ${timeouts:-0})) skip=${skip:-0}
((meson_rc != 0 && fail == 0)) && fail=1 # a build or harness failure counts too

# The ISA oneDNN picks here, and the one ONEDNN_MAX_CPU_ISA=AVX2 leaves: when they differ, the
# host runs other kernels than an AVX2 machine would, so the 'isa' suite runs under both.
mw=$MW_BUILD/worker/mwtrain
mw_isa() { env "$@" "$mw" version | sed -n 's/^CPU kernels: .*, ISA //p'; }
host_isa=$(mw_isa) avx2_isa=$(mw_isa ONEDNN_MAX_CPU_ISA=AVX2)
if (($# > 0)); then
    echo "isa: no AVX2 pass with meson test arguments ($*)"
elif [[ -z $host_isa || $host_isa == "$avx2_isa" ]]; then
    echo "isa: no AVX2 pass: oneDNN uses '${host_isa:-none}' here, as under ONEDNN_MAX_CPU_ISA=AVX2"
else
    echo "isa: suite 'isa' again under ONEDNN_MAX_CPU_ISA=AVX2 ($avx2_isa; the host's is $host_isa)"
    ONEDNN_MAX_CPU_ISA=AVX2 meson test -C "$MW_BUILD" --print-errorlogs --num-processes 2 \
        --no-rebuild --suite isa --logbase testlog-avx2 2>&1 | tee "$MW_BUILD/test-output-avx2.txt"
    isa_rc=${PIPESTATUS[0]}
    count() { sed -n "s/^$1: *\([0-9]*\).*/\1/p" "$MW_BUILD/test-output-avx2.txt" | tail -n 1; }
    i_ok=$(count Ok) i_fail=$(count Fail) i_skip=$(count Skipped) i_timeouts=$(count Timeout)
    i_fail=$((${i_fail:-0} + ${i_timeouts:-0}))
    ((isa_rc != 0 && i_fail == 0)) && i_fail=1
    ok=$((ok + ${i_ok:-0})) fail=$((fail + i_fail)) skip=$((skip + ${i_skip:-0}))
fi

wait "$prebuild"
echo "fuzz: TF_CONFIG parser, ${MW_FUZZ_SECONDS:-20} s"
if FUZZ_OUT="$MW_BUILD-fuzz" FUZZ_STAGE=run bash "$MW_ROOT/tests/fuzz/run.sh" \
    "${MW_FUZZ_SECONDS:-20}"; then
    ok=$((ok + 1))
else
    fail=$((fail + 1)) failed_checks+="${failed_checks:+, }fuzz"
fi
echo "sanitizers: the unit suite under ASan + UBSan"
if bash "$MW_ROOT/tests/sanitize/unit_asan.sh" "$MW_BUILD-asan"; then
    ok=$((ok + 1))
else
    fail=$((fail + 1)) failed_checks+="${failed_checks:+, }ASan unit suite"
fi
echo "no-CUDA build: -Dcuda=disabled compiles and falls back"
if bash "$MW_ROOT/tests/cuda/test_nocuda_build.sh" "$MW_BUILD-nocuda"; then
    ok=$((ok + 1))
else
    fail=$((fail + 1)) failed_checks+="${failed_checks:+, }no-CUDA build"
fi
# last, where the end of the output shows it: which tests failed, and the end of what each printed
python3 "$MW_ROOT/tests/failures.py" "$MW_BUILD/meson-logs/testlog.json" \
    "$MW_BUILD/meson-logs/testlog-avx2.json"
echo "tests: $ok passed, $fail failed${failed_checks:+ ($failed_checks)}, $skip skipped"
((fail == 0))
