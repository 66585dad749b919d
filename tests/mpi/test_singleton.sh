#!/usr/bin/env bash
# A command started without a launcher is an MPI singleton, which mwtrain starts without Open
# MPI's helper daemon and with the ob1 messaging layer only (worker/main.c singleton_env;
# docs/commands.md "Started without mpirun"), unless the user set those parameters. Asserted
# from the processes and files the command opens (strace), never from a timing:
#   - `mwtrain version` alone: no orted is executed, no pml component but ob1's is opened;
#   - the user's own OMPI_MCA_ess_singleton_isolated=0 and OMPI_MCA_pml=^ucx are kept: orted
#     is executed and the cm layer opened (the control: the trace sees both when they happen);
#   - under mpirun nothing is set: the ranks open what the environment says (tests/openmpi.env
#     names ob1; without it, cm is opened too).
#   test_singleton.sh MWTRAIN
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
mw=$(realpath "$1")
if ! command -v strace >/dev/null; then
    echo "SKIP: strace is not installed (deploy/setup.sh installs it)"
    exit 77
fi
if ! why=$(strace -qq -o /dev/null true 2>&1); then
    echo "SKIP: strace cannot trace a process here (no ptrace): $why"
    exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# trace NAME CMD...: the executions and the opened files of CMD and its children, in $tmp/NAME
trace() {
    local name=$1
    shift
    strace -f -qq -e trace=execve,openat -o "$tmp/$name" "$@" >"$tmp/$name.out" 2>&1
    rc=$?
}
orted() { grep -c 'execve("[^"]*/orted"' "$tmp/$1"; }
# the pml components the mwtrain processes opened (mpirun and its daemon open them all)
pmls() {
    local pids
    pids=$(sed -n 's|^\([0-9]*\) *execve("[^"]*/mwtrain".*|\1|p' "$tmp/$1" | sort -u | paste -sd'|')
    grep -E "^($pids) " "$tmp/$1" | grep -o 'mca_pml_[a-z0-9]*\.so' | sort -u | tr '\n' ' '
}

unset OMPI_MCA_ess_singleton_isolated
env -u OMPI_MCA_pml strace -f -qq -e trace=execve,openat -o "$tmp/alone" "$mw" version \
    >"$tmp/alone.out" 2>&1
rc=$?
check '[[ $rc -eq 0 && $(orted alone) -eq 0 && $(pmls alone) == "mca_pml_ob1.so " ]]' \
    "alone: exit $rc, orted executed $(orted alone) time(s), pml components opened: $(pmls alone)"

OMPI_MCA_ess_singleton_isolated=0 OMPI_MCA_pml=^ucx trace user "$mw" version
check '[[ $rc -eq 0 && $(orted user) -ge 1 && $(pmls user) == *mca_pml_cm.so* ]]' \
    "the user's parameters kept: exit $rc, orted executed $(orted user) time(s), pml components opened: $(pmls user)"

# under mpirun: the environment's choice (openmpi.env's ob1 here), and cm without it
OMPI_MCA_pml=ob1 trace mpirun mpirun -n 2 "$mw" version
check '[[ $rc -eq 0 && $(pmls mpirun) == "mca_pml_ob1.so " ]]' \
    "mpirun -n 2 with OMPI_MCA_pml=ob1: exit $rc, pml components opened: $(pmls mpirun)"
env -u OMPI_MCA_pml strace -f -qq -e trace=execve,openat -o "$tmp/bare" mpirun -n 2 "$mw" version \
    >"$tmp/bare.out" 2>&1
rc=$?
check '[[ $rc -eq 0 && $(pmls bare) == *mca_pml_cm.so* ]]' \
    "mpirun -n 2 without it: nothing set for the ranks: exit $rc, pml components opened: $(pmls bare)"
finish
