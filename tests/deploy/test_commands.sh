#!/usr/bin/env bash
# Run every mwtrain command shipped in deploy/ on this machine, so the flags in scripts,
# manifests and READMEs cannot rot: extract_commands.py finds the commands (each follows a
# `# mwtrain-command` line) and rewrites them for a local run (2 ranks under mpirun, CPU,
# 2 steps, paths under a temporary directory, a local hostfile); each must exit 0 within
# 300 s. An unknown flag exits 2 and fails the test, naming the file and line.
#   test_commands.sh MWTRAIN [SOURCE_ROOT]      (SOURCE_ROOT default: $MW_SRCDIR)
# Environment: MW_DATA_DIR (IDX files, default /usr/share/datasets/fashion-mnist).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
mw=$(realpath "$1")
src=${2:-${MW_SRCDIR:?pass SOURCE_ROOT or set MW_SRCDIR}}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
unset TF_CONFIG
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf 'localhost slots=2\n' >"$tmp/hostfile"

python3 "$here/extract_commands.py" "$src/deploy" "$mw" "$tmp/run" \
    "${MW_DATA_DIR:-/usr/share/datasets/fashion-mnist}" "$tmp/hostfile" >"$tmp/commands"

n=0
while IFS=$'\t' read -r where cmd msg; do
    n=$((n + 1))
    if [[ $cmd == ERROR ]]; then
        echo "FAIL $where: $msg"
        fail=$((fail + 1))
        continue
    fi
    argv=()
    eval "argv=($cmd)"
    log=$tmp/log-$n
    # the commands run in file order: a train, its resume and its eval share a directory
    if (cd "$tmp" && timeout 300 "${argv[@]}") </dev/null >"$log" 2>&1; then
        echo "ok   $where: $cmd"
        pass=$((pass + 1))
    else
        rc=$?
        echo "FAIL $where (exit $rc): $cmd"
        # mwtrain's own message when there is one, else the end of the output
        if grep -q '^mwtrain: error' "$log"; then
            grep '^mwtrain: error' "$log" | sort -u | sed 's/^/     | /'
        else
            grep -v '^[[:space:]-]*$' "$log" | tail -n 8 | sed 's/^/     | /'
        fi
        fail=$((fail + 1))
    fi
done <"$tmp/commands"
if ((n == 0)); then
    echo "FAIL: no marked mwtrain command found under $src/deploy"
    fail=1
fi
finish
