#!/usr/bin/env bash
# The CUDA module (worker/replicas/device.h) where a CUDA driver reports devices but GPU training cannot
# run: mwtrain must still start and train on the CPU with --device auto, say why as a WARNING
# (a cluster user must notice), and --device gpu must be one error, exit 7, naming what is
# missing. A fake driver (tests/cuda/fake_libcuda.c, found through LD_LIBRARY_PATH) plays the
# driver; the real module and CUDA libraries are used where they are reachable.
#   test_module_load.sh MWTRAIN FAKE_LIBCUDA_DIR probes
#       cuInit says "no device" (information), cuInit fails otherwise (warning), the driver
#       sees a device the CUDA runtime cannot use (warning), MW_CUDA_MODULE naming a missing
#       file (warning), and `version` in each case
#   test_module_load.sh MWTRAIN FAKE_LIBCUDA_DIR no-cuda-libs
#       in a private mount namespace whose CUDA toolkit directories are hidden (an empty
#       tmpfs over each): mwtrain still starts and trains on the CPU, the module cannot be
#       loaded, and every message names the missing library. Skipped (77) where mount
#       namespaces cannot be made. Nothing outside the namespace is touched.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
mw=$1 fake=$2 mode=$3
unset MW_CUDA_MODULE MW_FAKE_CUINIT MW_FAKE_DEVICES
quick=(--epochs 1 --steps-per-epoch 2 --test-examples 50 --checkpoint-every-epochs 0
       --summary-dir "" --progress none)
[[ -f $fake/libcuda.so.1 ]] || { echo "FAIL: no fake driver in $fake"; exit 1; }

# expect NAME ENV... -- AUTO_LINE_REGEX GPU_MESSAGE: auto trains on the CPU with that line,
# gpu exits 7 with that message, each printed once
expect() {
    local name=$1
    shift
    local envs=()
    while [[ $1 != -- ]]; do envs+=("$1"); shift; done
    local line=$2 msg=$3 out rc
    out=$(env "${envs[@]}" LD_LIBRARY_PATH="$fake" "$mw" train --device auto "${quick[@]}" 2>&1)
    rc=$?
    check '[[ $rc -eq 0 ]] && grep -q "^Epoch 1," <<<"$out"' "$name: auto trains on the CPU: $out"
    check '[[ $(grep -cE "$line" <<<"$out") -eq 1 ]]' "$name: auto says /$line/: $out"
    out=$(env "${envs[@]}" LD_LIBRARY_PATH="$fake" "$mw" train --device gpu "${quick[@]}" 2>&1)
    rc=$?
    check '[[ $rc -eq 7 && $(grep -cF "mwtrain: error: $msg" <<<"$out") -eq 1 ]] &&
           ! grep -q "^Epoch" <<<"$out"' "$name: gpu exits 7 with '$msg' (exit $rc): $out"
    echo "$name: $(grep -E "$line" <<<"$out$(env "${envs[@]}" LD_LIBRARY_PATH="$fake" \
        "$mw" train --device auto "${quick[@]}" 2>&1)" | head -n 1)"
}

if [[ $mode == probes ]]; then
    expect "cuInit: no device" MW_FAKE_CUINIT=100 -- \
        '^mwtrain info: no CUDA device \(cuInit: no CUDA-capable device is detected \(CUDA error 100\)\): training on the CPU$' \
        '--device gpu: no CUDA device is available (cuInit: no CUDA-capable device is detected (CUDA error 100))'
    expect "cuInit fails" MW_FAKE_CUINIT=35 -- \
        '^mwtrain warning: cannot use the GPU \(the CUDA driver failed to start, cuInit: fake driver error \(CUDA error 35\)\): training on the CPU$' \
        '--device gpu: the CUDA devices cannot be used (the CUDA driver failed to start, cuInit: fake driver error (CUDA error 35))'
    expect "driver has 0 devices" MW_FAKE_DEVICES=0 -- \
        '^mwtrain info: no CUDA device \(cuDeviceGetCount found 0 devices\): training on the CPU$' \
        '--device gpu: no CUDA device is available (cuDeviceGetCount found 0 devices)'
    if [[ -f $(dirname "$mw")/mwtrain-cuda.so ]]; then
        expect "runtime disagrees" MW_FAKE_DEVICES=2 -- \
            '^mwtrain warning: cannot use the GPU \(the driver sees 2 devices, the CUDA runtime none: cudaGetDeviceCount: .*\): training on the CPU$' \
            '--device gpu: the CUDA devices cannot be used (the driver sees 2 devices, the CUDA runtime none: cudaGetDeviceCount: '
    fi
    expect "MW_CUDA_MODULE missing" MW_CUDA_MODULE=/nonexistent/mwtrain-cuda.so -- \
        '^mwtrain warning: cannot use the GPU \(the CUDA module cannot be loaded: /nonexistent/mwtrain-cuda.so: cannot open shared object file: No such file or directory\): training on the CPU$' \
        '--device gpu: the CUDA devices cannot be used (the CUDA module cannot be loaded: /nonexistent/mwtrain-cuda.so: cannot open shared object file'
    out=$(MW_CUDA_MODULE=/nonexistent/mwtrain-cuda.so "$mw" version 2>&1)
    check 'grep -qx "CUDA: the CUDA module cannot be loaded: /nonexistent/mwtrain-cuda.so: cannot open shared object file: No such file or directory (GPU training unavailable)" <<<"$out"' \
        "version says why the module cannot be loaded: $out"
    out=$(MW_CUDA_MODULE=$fake/libcuda.so.1 "$mw" version 2>&1)
    check 'grep -q "^CUDA: .*/libcuda.so.1: no mw_gpu_module_get(): not an mwtrain CUDA module (GPU training unavailable)$" <<<"$out"' \
        "version refuses a library that is not a module: $out"
elif [[ $mode == no-cuda-libs ]]; then
    if ! unshare -m true 2>/dev/null; then
        echo "SKIP: cannot make a mount namespace here (unshare -m failed)"
        exit 77
    fi
    # every directory the loader could take a CUDA library from
    hide=$( (realpath /usr/local/cuda 2>/dev/null
             ldconfig -p | sed -n 's/.*\(libcudart\|libcublas\|libnccl\)[^ ]* .*=> //p' |
                 xargs -r -n1 realpath | xargs -r -n1 dirname) | sort -u)
    [[ -n $hide ]] || { echo "SKIP: no CUDA toolkit installed: nothing to hide"; exit 77; }
    echo "hiding: $(tr '\n' ' ' <<<"$hide")"
    inner=$(mktemp)
    trap 'rm -f "$inner"' EXIT
    cat >"$inner" <<'INNER'
set -u
for d in $HIDE; do
    [[ -d $d ]] || continue # inside one hidden already
    mount -t tmpfs -o size=1m,mode=0755 mwtrain-test "$d" || exit 3
done
echo "--- ldd"; ldd "$MW" | grep -E "not found|cuda|nccl|cublas" || echo "no CUDA library, none missing"
echo "--- version"; LD_LIBRARY_PATH=$FAKE "$MW" version
echo "--- auto"; LD_LIBRARY_PATH=$FAKE "$MW" train --device auto $QUICK 2>&1; echo "rc=$?"
echo "--- gpu"; LD_LIBRARY_PATH=$FAKE "$MW" train --device gpu $QUICK 2>&1; echo "rc=$?"
INNER
    q="--epochs 1 --steps-per-epoch 2 --test-examples 50 --checkpoint-every-epochs 0"
    out=$(HIDE="$hide" MW="$mw" FAKE="$fake" QUICK="$q --summary-dir= --progress none" \
          unshare -m --propagation private bash "$inner" 2>&1)
    rc=$?
    echo "$out"
    check '[[ $rc -eq 0 ]]' "the namespace was set up (exit $rc)"
    check 'grep -q "^no CUDA library, none missing$" <<<"$out"' "mwtrain links no CUDA library"
    check 'grep -q "^CUDA: the CUDA module cannot be loaded: libcudart.so.[0-9]*: cannot open shared object file" <<<"$out"' \
        "version names the missing CUDA runtime"
    check 'grep -q "^mwtrain warning: cannot use the GPU (the CUDA module cannot be loaded: libcudart.so.[0-9]*: cannot open shared object file: No such file or directory): training on the CPU$" <<<"$out" &&
           grep -q "^Epoch 1," <<<"$out" && grep -qx "rc=0" <<<"$out"' \
        "--device auto trains on the CPU and warns, naming the library"
    check 'grep -q "^mwtrain: error: --device gpu: the CUDA devices cannot be used (the CUDA module cannot be loaded: libcudart.so.[0-9]*: cannot open shared object file" <<<"$out" &&
           grep -qx "rc=7" <<<"$out"' "--device gpu: exit 7 naming the library"
    # the namespace's mounts died with it
    check '! grep -q mwtrain-test /proc/mounts' "no test mount is left behind"
else
    echo "usage: test_module_load.sh MWTRAIN FAKE_LIBCUDA_DIR probes|no-cuda-libs"
    exit 2
fi
finish
