#!/usr/bin/env bash
# The build without CUDA (-Dcuda=disabled): it compiles with warnings as errors and builds no
# CUDA module, the binary says so in `version`, --device auto trains on the CPU naming the
# reason, and --device gpu is one error (exit 7). Run by deploy/local/test.sh after the suites (it configures a
# build of its own, without tests: a few seconds).
#   test_nocuda_build.sh BUILD_DIR
# MW_STAGE=build only configures and compiles (deploy/local/test.sh does it in the background
# while the suites run); the run after it then finds the build made.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
build=$1
src=$(cd "$(dirname "$0")/../.." && pwd)
if [[ -d $build ]]; then
    meson setup --reconfigure "$build" "$src" -Dcuda=disabled -Dtests=false -Dwerror=true >/dev/null
else
    meson setup "$build" "$src" -Dcuda=disabled -Dtests=false -Dwerror=true \
        -Dbuildtype=debugoptimized >/dev/null
fi
out=$(ninja -C "$build" 2>&1)
rc=$?
[[ ${MW_STAGE:-} != build ]] || exit "$rc"
check '[[ $rc -eq 0 ]]' "the no-CUDA build compiles: $(tail -n 20 <<<"$out")"
mw=$build/worker/mwtrain
check '[[ ! -e $build/worker/mwtrain-cuda.so ]]' "no CUDA module is built"
out=$("$mw" version 2>&1)
check 'grep -qx "CUDA: not built" <<<"$out"' "version says CUDA is not built: $out"
quick=(--epochs 1 --steps-per-epoch 2 --test-examples 50 --checkpoint-every-epochs 0
       --summary-dir "" --progress none)
out=$("$mw" train --device auto "${quick[@]}" 2>&1)
rc=$?
check '[[ $rc -eq 0 ]] && grep -q "info: built without CUDA.*: training on the CPU" <<<"$out" &&
       grep -q "^Epoch 1," <<<"$out"' "--device auto trains on the CPU and says why: $out"
msg='error: --device gpu: no CUDA device is available (built without CUDA'
out=$(mpiexec -n 2 "$mw" train --device gpu "${quick[@]}" 2>&1)
rc=$?
check '[[ $rc -eq 7 && $(grep -cF "$msg" <<<"$out") -eq 1 ]]' \
    "--device gpu: one error, exit 7: $out"
out=$(mpiexec -n 2 "$mw" cluster 2>&1)
rc=$?
check '[[ $rc -eq 0 ]] && grep -Eq "^1 +1 .* worker +cpu$" <<<"$out"' "cluster shows cpu: $out"
finish "no-CUDA build"
