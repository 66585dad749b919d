#!/usr/bin/env bash
# The unit suite under AddressSanitizer and UndefinedBehaviorSanitizer, as CI runs it after the
# main suites (deploy/local/test.sh): a build of its own (without CUDA: nvcc code is not
# instrumented), warnings as errors, any undefined behaviour fatal, leaks reported except
# Open MPI's own (tests/sanitize/lsan.supp).
#   unit_asan.sh BUILD_DIR [meson test arguments...]
# MW_STAGE=build only configures and compiles (deploy/local/test.sh does it in the background
# while the suites run).
set -euo pipefail
build=$1
shift
src=$(cd "$(dirname "$0")/../.." && pwd)
if [[ ! -f $build/build.ninja ]]; then
    meson setup "$build" "$src" -Db_sanitize=address,undefined -Db_lundef=false -Dcuda=disabled \
        -Dwerror=true -Dbuildtype=debugoptimized -Dc_args=-fno-sanitize-recover=all >/dev/null
fi
ninja -C "$build" >/dev/null
[[ ${MW_STAGE:-} != build ]] || exit 0
export ASAN_OPTIONS=abort_on_error=0:detect_leaks=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export LSAN_OPTIONS=suppressions=$src/tests/sanitize/lsan.supp:print_suppressions=0
meson test -C "$build" --suite unit --print-errorlogs --num-processes 2 "$@"
