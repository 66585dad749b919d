#!/usr/bin/env bash
# A self-contained copy of a CUDA build for a GPU host that has CUDA, cuDNN and NCCL but none
# of this project's Debian packages (a lent machine whose image has the CUDA toolkit and
# PyTorch's nvidia-* wheels, and nothing that can be installed): the binaries in a build
# directory's layout, so tests/bench/gpu_first_run.sh takes the bundle as its BUILDDIR, with
# the shared libraries they need from this machine, Open MPI's mpirun, plugins and help files.
#
#   gpu_bundle.sh BUILDDIR OUTDIR [--xz]
#
# OUTDIR gets worker/mwtrain and worker/mwtrain-cuda.so, tests/cuda/test_cuda,
# tests/mpi/cmp_weights, bin/mpirun and bin/orted, data/fashion-mnist (30000 training examples), lib/ (every library the binaries and Open MPI's plugins
# load, except the C library's own, libstdc++ and libgcc_s, which the host's newer ones
# replace, and CUDA's, which the host must have), openmpi/ (plugins, help files) and env.sh;
# --xz also writes OUTDIR.tar.xz. On the GPU host:
#
#   tar xJf gpu-bundle.tar.xz -C /tmp && . /tmp/gpu-bundle/env.sh &&
#       tests/bench/gpu_first_run.sh /tmp/gpu-bundle /tmp/first-run
#
# env.sh puts lib/ and the host's CUDA libraries on LD_LIBRARY_PATH (/usr/local/cuda, and the
# nvidia-* wheels of the python3 on the PATH, where cuDNN and NCCL come from on such hosts),
# bin/ on the PATH, and points Open MPI at the bundle's plugins and help files. Test
# bundle-hidden-mpi (tests/cuda/meson.build) runs the bundle with this machine's Open MPI and
# the other bundled libraries hidden.
set -euo pipefail
build=${1:?usage: gpu_bundle.sh BUILDDIR OUTDIR [--xz]} out=${2:?usage: gpu_bundle.sh BUILDDIR OUTDIR [--xz]}
xz=${3:-}
ompi_lib=/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3
ompi_share=/usr/share/openmpi
for f in worker/mwtrain worker/mwtrain-cuda.so tests/cuda/test_cuda tests/mpi/cmp_weights; do
    [[ -f $build/$f ]] || { echo "gpu_bundle: $build/$f is missing (a build with CUDA?)" >&2; exit 1; }
done
[[ -d $ompi_lib && -d $ompi_share ]] || { echo "gpu_bundle: no Open MPI at $ompi_lib" >&2; exit 1; }
rm -rf "$out"
mkdir -p "$out"/{worker,tests/cuda,tests/mpi,bin,lib,openmpi}
for f in worker/mwtrain worker/mwtrain-cuda.so tests/cuda/test_cuda tests/mpi/cmp_weights; do
    cp "$build/$f" "$out/$f"
done
cp -L "$(command -v mpirun)" "$out/bin/mpirun"
# A process started without mpirun (a singleton: every 1-rank command) forks orted from Open
# MPI's bindir; env.sh points OPAL_BINDIR at bin/, so the bundle must hold it too.
cp -L "$(command -v orted)" "$out/bin/orted"
cp -r "$ompi_lib" "$out/openmpi/plugins"
cp -r "$ompi_share" "$out/openmpi/share"
# PMIx (Open MPI's process manager interface) loads its own plugins from its own install dir;
# a host with another PMIx there (the lent GPU machines have one) prints a page of warnings
# per process about its mismatched plugins
pmix_lib=/usr/lib/x86_64-linux-gnu/pmix2/lib/pmix
[[ -d $pmix_lib ]] && cp -r "$pmix_lib" "$out/openmpi/pmix"

# A learnable data set for the GPU-vs-CPU agreement (a GPU host has no Debian Fashion-MNIST,
# and on random images the loss stays at ln 10 whatever the arithmetic): the first 30000
# training examples of Fashion-MNIST and its whole test set, as IDX files, 17 MB.
fm=/usr/share/datasets/fashion-mnist
[[ -f $fm/train-images-idx3-ubyte.gz ]] ||
    { echo "gpu_bundle: no Fashion-MNIST at $fm (deploy/setup.sh installs it)" >&2; exit 1; }
mkdir -p "$out/data/fashion-mnist"
cp "$fm"/t10k-*-ubyte.gz "$out/data/fashion-mnist/"
python3 - "$fm" "$out/data/fashion-mnist" 30000 <<'PY'
import gzip, struct, sys
src, dst, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
for name, head in (("train-images-idx3-ubyte.gz", 16), ("train-labels-idx1-ubyte.gz", 8)):
    with gzip.open(f"{src}/{name}") as f:
        d = f.read()
    dims = struct.unpack(">%dI" % (head // 4), d[:head])
    per = 1
    for k in dims[2:]:
        per *= k
    with gzip.open(f"{dst}/{name}", "wb", 6) as f:
        f.write(struct.pack(">%dI" % (head // 4), dims[0], n, *dims[2:]) + d[head:head + n * per])
PY

# The libraries every ELF file of the bundle loads, found by the dynamic loader here.
keep() {
    case ${1##*/} in
    # glibc's own libraries: the host's glibc must be the one that runs, and these call its
    # private symbols (GLIBC_PRIVATE), which only the same build of glibc guarantees
    libc.so* | libm.so* | libpthread.so* | libdl.so* | librt.so* | ld-linux* | libutil.so*) return 1 ;;
    libresolv.so* | libanl.so* | libnss_*.so* | libBrokenLocale.so* | libmvec.so* | libnsl.so.1) return 1 ;;
    libthread_db.so* | libc_malloc_debug.so* | libmemusage.so* | libpcprofile.so*) return 1 ;;
    libstdc++.so* | libgcc_s.so*) return 1 ;;
    libcuda.so* | libcudart.so* | libcublas*.so* | libnccl.so* | libcudnn*.so* | libnvrtc*) return 1 ;;
    esac
    [[ $1 != /usr/local/cuda* ]]
}
n=0
while IFS= read -r elf; do
    while IFS= read -r lib; do
        if keep "$lib" && [[ ! -e $out/lib/${lib##*/} ]]; then
            cp -L "$lib" "$out/lib/"
            n=$((n + 1))
        fi
    done < <(ldd "$elf" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $3}')
done < <(find "$out/worker" "$out/tests" "$out/bin" "$out/openmpi" -type f \
    \( -name '*.so' -o -perm -u+x \))

# The oldest glibc the bundle runs on: the newest GLIBC_x.y symbol version any of its files
# imports (libevent_core's arc4random makes it 2.36 on Debian 12).
floor=$(find "$out" -type f \( -name '*.so*' -o -perm -u+x \) -exec objdump -T {} + 2>/dev/null |
    grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' | sort -V | tail -n 1)
[[ -n $floor ]] || { echo "gpu_bundle: objdump found no GLIBC symbol versions (binutils?)" >&2; exit 1; }
printf '# The bundle needs glibc %s or newer (the newest GLIBC_ symbol version its files import).\n_glibc_floor=%s\n' \
    "$floor" "$floor" >"$out/env.sh"
cat >>"$out/env.sh" <<'EOF'
# Source me: the bundle's libraries, mpirun and Open MPI plugins, and the host's CUDA.
_b=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
_glibc=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}')
if [[ -z $_glibc || $(printf '%s\n%s\n' "$_glibc_floor" "$_glibc" | sort -V | head -n 1) != "$_glibc_floor" ]]; then
    echo "gpu-bundle env.sh: this host's glibc is ${_glibc:-unknown}; the bundle needs $_glibc_floor or newer" >&2
    unset _b _glibc _glibc_floor
    return 1 2>/dev/null || exit 1
fi
_cuda=""
for _d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
    [[ -d $_d ]] && _cuda+=":$_d"
done
# cuDNN, NCCL, cuBLAS from PyTorch's nvidia-* wheels, where the host has them
if command -v python3 >/dev/null; then
    for _d in $(python3 -c 'import glob, os, sys
for p in sys.path:
    for d in sorted(glob.glob(os.path.join(p, "nvidia", "*", "lib"))):
        print(d)' 2>/dev/null); do
        _cuda+=":$_d"
    done
fi
export LD_LIBRARY_PATH="$_b/lib$_cuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH="$_b/bin:$PATH"
export OMPI_MCA_mca_base_component_path="$_b/openmpi/plugins" OPAL_PKGDATADIR="$_b/openmpi/share"
# a singleton (a rank started without mpirun) forks orted from here
export OPAL_BINDIR="$_b/bin"
# PMIx's plugins: the bundle's own; a host's other PMIx in PMIx's compiled-in directory is
# tried all the same (seen on the lent GPU machines), and what it cannot load is only
# warned about: not a page of it per process
[[ -d $_b/openmpi/pmix ]] && export PMIX_MCA_mca_base_component_path="$_b/openmpi/pmix"
export PMIX_MCA_mca_base_component_show_load_errors=none PMIX_MCA_pcompress_base_silence_warning=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
unset _b _d _cuda _glibc _glibc_floor
EOF
echo "gpu_bundle: $out: $n libraries, $(du -sh "$out" | cut -f1)"
if [[ $xz == --xz ]]; then
    tar -C "$(dirname "$out")" -cJf "$out.tar.xz" "$(basename "$out")"
    echo "gpu_bundle: $out.tar.xz: $(du -sh "$out.tar.xz" | cut -f1)"
fi
