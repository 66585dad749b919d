#!/usr/bin/env bash
# tests/bench/gpu_bundle.sh: the bundle of a CUDA build runs where none of this project's
# packages are installed. In a private mount namespace this machine's Open MPI (libraries,
# plugins, help files, mpirun, orted) and every other library the bundle carries are hidden (bind
# mounts of /dev/null and an empty directory); there, asserted:
#   - without the bundle's env.sh, mwtrain cannot start (so the hiding is real);
#   - with it, gpu_first_run.sh on fake GPUs (the hostdev module) passes its four GPU-vs-CPU
#     agreements, mpirun -n 2 included, and mwtrain finds libmpi in the bundle;
#   - one rank (a singleton, which forks orted) starts with orted hidden as well;
#   - env.sh states the bundle's glibc floor and refuses an older glibc with one message, and
#     the bundle holds no library of glibc's own;
#   - a build without the CUDA module: exit 1, one message naming it, no bundle written.
# Needs root (unshare -m); SKIP (77) with the reason otherwise.
#   test_bundle.sh BUILDDIR HOSTDEV_MODULE
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
build=$1 module=$2
src=$(cd "$(dirname "$0")/../.." && pwd)
if [[ $(id -u) != 0 ]] || ! unshare -m true 2>/dev/null; then
    echo "SKIP: needs root and unshare -m (a private mount namespace)"
    exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

bash "$src/tests/bench/gpu_bundle.sh" "$build" "$tmp/b" >"$tmp/bundle.out" 2>&1
rc=$?
cat "$tmp/bundle.out"
check '[[ $rc -eq 0 && -x $tmp/b/worker/mwtrain && -f $tmp/b/lib/libmpi.so.40 && -f $tmp/b/env.sh ]]' \
    "the bundle is made: $(tail -n 2 "$tmp/bundle.out")"

# hidden.sh BUNDLE CMD...: CMD in a mount namespace without this machine's copies of the
# bundle's libraries and Open MPI
cat >"$tmp/hidden.sh" <<'SH'
set -e
b=$1
shift
mkdir -p "$b.empty"
for d in /usr/lib/x86_64-linux-gnu/openmpi /usr/share/openmpi /usr/lib/x86_64-linux-gnu/pmix2; do
    [[ -d $d ]] && mount --bind "$b.empty" "$d"
done
n=0
for l in "$b"/lib/*; do
    for d in /usr/lib/x86_64-linux-gnu /lib/x86_64-linux-gnu; do
        f=$(readlink -f "$d/${l##*/}" 2>/dev/null || true)
        [[ -f $f ]] && mount --bind /dev/null "$f" && n=$((n + 1))
    done
done
for f in mpirun mpiexec orterun orted; do
    f=$(readlink -f "/usr/bin/$f" 2>/dev/null || true)
    [[ -f $f ]] && mount --bind /dev/null "$f"
done
echo "hidden: $n library files, Open MPI's plugins and mpirun"
set +e
"$@"
SH
out=$(unshare -m bash "$tmp/hidden.sh" "$tmp/b" "$tmp/b/worker/mwtrain" --version 2>&1)
rc=$?
check '[[ $rc -ne 0 ]] && grep -q "hidden: [1-9][0-9]* library files" <<<"$out"' \
    "without env.sh mwtrain must not start (exit $rc): $out"

unshare -m bash "$tmp/hidden.sh" "$tmp/b" bash -c '. "$1/env.sh" && ldd "$1/worker/mwtrain" | grep libmpi &&
    MW_CUDA_MODULE="$2" MW_HOSTDEV_GPUS=2 bash "$3/tests/bench/gpu_first_run.sh" "$1" "$4" --quick \
        --no-throughput --sgd-steps=5' _ "$tmp/b" "$module" "$src" "$tmp/fr" >"$tmp/run.out" 2>&1
rc=$?
cat "$tmp/run.out"
check '[[ $rc -eq 0 ]] && grep -q "libmpi.so.40 => $tmp/b/lib/libmpi.so.40" "$tmp/run.out" &&
       [[ $(grep -c "^| SGD, .* | PASS |" "$tmp/fr/report.md") -eq 4 ]] &&
       grep -qF "| SGD, mpirun -n 2 on 2 GPUs vs CPU | PASS |" "$tmp/fr/report.md" &&
       grep -qF "| SGD, token GPT, 1 rank on 2 GPU(s) vs CPU, 2 replica(s) | PASS |" "$tmp/fr/report.md"' \
    "the first run from the bundle (exit $rc): $(tail -n 3 "$tmp/run.out")"
# a 1-rank command with orted hidden too (a singleton forks orted: OPAL_BINDIR, the bundle's)
out=$(unshare -m bash "$tmp/hidden.sh" "$tmp/b" bash -c '. "$1/env.sh" && "$1/worker/mwtrain" cluster' \
    _ "$tmp/b" 2>&1)
rc=$?
check '[[ $rc -eq 0 ]] && grep -qE "^0 +0 +worker\[0\] .* chief +cpu" <<<"$out"' \
    "mwtrain cluster, one rank, Open MPI hidden (exit $rc): $out"
# the glibc floor: env.sh refuses a host older than the newest GLIBC_ version the bundle imports
check 'grep -qE "^_glibc_floor=2\.[0-9]+$" "$tmp/b/env.sh"' "env.sh states the floor: $(grep floor "$tmp/b/env.sh")"
sed 's/^_glibc_floor=.*/_glibc_floor=9.99/' "$tmp/b/env.sh" >"$tmp/b/env-future.sh"
out=$(bash -c '. "$1" && echo sourced' _ "$tmp/b/env-future.sh" 2>&1)
rc=$?
check '[[ $rc -ne 0 ]] && ! grep -q sourced <<<"$out" &&
       grep -qE "gpu-bundle env.sh: this host.s glibc is 2\.[0-9]+; the bundle needs 9\.99 or newer" <<<"$out"' \
    "a host older than the floor is refused (exit $rc): $out"
check '! ls "$tmp/b/lib" | grep -qE "^(libc|libm|libresolv|libpthread|libdl|librt|libnss_|libanl)\.so"' \
    "no glibc library in the bundle: $(ls "$tmp/b/lib" | grep -E "^lib(c|m|resolv|pthread|dl|rt|nss_|anl)\." | tr "\n" " ")"
mkdir -p "$tmp/half/worker" && cp "$build/worker/mwtrain" "$tmp/half/worker/"
out=$(bash "$src/tests/bench/gpu_bundle.sh" "$tmp/half" "$tmp/b2" 2>&1)
rc=$?
check '[[ $rc -eq 1 && ! -e $tmp/b2 ]] && grep -qF "gpu_bundle: $tmp/half/worker/mwtrain-cuda.so is missing (a build with CUDA?)" <<<"$out"' \
    "a build without the CUDA module: exit $rc: $out"
finish
