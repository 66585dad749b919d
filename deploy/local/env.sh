# Sourced by the local scripts: build directory, Open MPI as root, thread counts.
MW_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
MW_BUILD=${MW_BUILD:-$MW_ROOT/build}
# Open MPI as the tests run it (tests/openmpi.env): as root, which it refuses unless told
# (containers and CI run as root), and with more ranks than cores.
source "$MW_ROOT/tests/lib.sh"
# Build (or rebuild) mwtrain in $MW_BUILD; extra arguments go to meson setup.
mw_build() {
    if [[ ! -f $MW_BUILD/build.ninja ]]; then
        meson setup "$MW_BUILD" "$MW_ROOT" "$@"
    fi
    ninja -C "$MW_BUILD"
}
