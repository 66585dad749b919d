#!/usr/bin/env bash
# A command started without a launcher is an MPI singleton, which mwtrain starts as Open MPI's
# isolated singleton (no helper daemon) with its files in a directory of its own, removed at
# the end, and with the ob1 messaging layer only (worker/main.c singleton_env; docs/commands.md
# "Started without mpirun"), unless the user set those parameters. Asserted from what the
# processes execute and open (strace), never from a timing:
#   - `mwtrain version` alone: no orted is executed, no pml component but ob1's is opened, and
#     nothing is left in TMPDIR, also when a SIGTERM ends it after MPI_Init;
#   - the user's own OMPI_MCA_ess_singleton_isolated=0 and OMPI_MCA_pml=^ucx are kept: orted is
#     executed and the cm layer opened (the control: the trace sees both when they happen);
#   - under mpirun nothing is set: the ranks open what the environment names (tests/openmpi.env
#     names ob1; without it, cm is opened too);
#   - 200 singletons, 8 at a time, all start and leave nothing: isolated singletons that share
#     Open MPI's default session directory failed MPI_Init in 5 of 200 so (one that ended
#     removed it under another that started).
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
# the singletons' own directories go under TMPDIR: a test-local one shows what is left
export TMPDIR=$tmp/t
mkdir "$TMPDIR"
left() { find "$TMPDIR" -mindepth 1 | head -n 3 | tr '\n' ' '; }
# trace NAME CMD...: the executions and the opened files of CMD and its children, in $tmp/NAME
trace() {
    local name=$1
    shift
    strace -f -qq -e trace=execve,openat,mkdir -o "$tmp/$name" "$@" >"$tmp/$name.out" 2>&1
    rc=$?
}
# the pml components the mwtrain processes opened (mpirun and its daemon open them all)
pmls() {
    local pids
    pids=$(sed -n 's|^\([0-9]*\) *execve("[^"]*/mwtrain".*|\1|p' "$tmp/$1" | sort -u | paste -sd'|')
    grep -E "^($pids) " "$tmp/$1" | grep -o 'mca_pml_[a-z0-9]*\.so' | sort -u | tr '\n' ' '
}

orted() { grep -c 'execve("[^"]*/orted"' "$tmp/$1"; }
trace alone env -u OMPI_MCA_pml "$mw" version
check '[[ $rc -eq 0 && $(orted alone) -eq 0 && $(pmls alone) == "mca_pml_ob1.so " ]]' \
    "alone: exit $rc, orted executed $(orted alone) time(s), pml components opened: $(pmls alone)"
check '[[ -z $(left) ]] && grep -q "mkdir(\"$TMPDIR/mwtrain-mpi-" "$tmp/alone"' \
    "alone: its own directory under TMPDIR, removed: left $(left)"

# ended by a signal (held after MPI_Init until one comes): the handler removes it too
MW_FAULT=hold:finish:0 "$mw" version >"$tmp/held.out" 2>&1 &
held=$!
for _ in $(seq 100); do grep -q "MW_FAULT: holding" "$tmp/held.out" && break; sleep 0.1; done
kill -TERM "$held"
wait "$held"
rc=$?
check '[[ $rc -eq 143 && -z $(left) ]]' "ended by SIGTERM after MPI_Init: exit $rc (143), left \
in TMPDIR: $(left)"

trace user env OMPI_MCA_ess_singleton_isolated=0 OMPI_MCA_pml=^ucx "$mw" version
check '[[ $rc -eq 0 && $(orted user) -ge 1 && $(pmls user) == *mca_pml_cm.so* ]]' \
    "the user's parameters kept: exit $rc, orted executed $(orted user) time(s), pml \
components opened: $(pmls user)"

# under mpirun: the environment's choice (openmpi.env's ob1 here), and cm without it
trace mpirun env OMPI_MCA_pml=ob1 mpirun -n 2 "$mw" version
check '[[ $rc -eq 0 && $(pmls mpirun) == "mca_pml_ob1.so " ]]' \
    "mpirun -n 2 with OMPI_MCA_pml=ob1: exit $rc, pml components opened: $(pmls mpirun)"
trace bare env -u OMPI_MCA_pml mpirun -n 2 "$mw" version
check '[[ $rc -eq 0 && $(pmls bare) == *mca_pml_cm.so* ]]' \
    "mpirun -n 2 without it: nothing set for the ranks: exit $rc, pml components opened: $(pmls bare)"

# singletons starting and ending side by side
seq 200 | xargs -P 8 -I{} sh -c '"$1" --help >/dev/null 2>"$2/many.{}.err" || echo "$2/many.{}.err"' \
    _ "$mw" "$tmp" >"$tmp/many.failed"
check '[[ ! -s $tmp/many.failed && -z $(left) ]]' "200 singletons, 8 at a time: \
$(wc -l <"$tmp/many.failed") failed to start: $(head -n 1 "$tmp/many.failed" |
    xargs -r grep -m 1 -i "error\|fail"); left in TMPDIR: $(left)"
finish
