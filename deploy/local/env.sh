# Sourced by the local scripts: build directory, Open MPI as root, thread counts.
MW_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
MW_BUILD=${MW_BUILD:-$MW_ROOT/build}
# Open MPI refuses to run as root unless told; containers and CI run as root.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Build (or rebuild) mwtrain in $MW_BUILD; extra arguments go to meson setup.
mw_build() {
    if [[ ! -f $MW_BUILD/build.ninja ]]; then
        meson setup "$MW_BUILD" "$MW_ROOT" "$@"
    fi
    ninja -C "$MW_BUILD"
}
