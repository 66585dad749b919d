#!/usr/bin/env bash
# pinned.sh N CMD...: CMD on the first N CPUs this process may use (taskset), as a cpuset or a
# launcher's binding would leave a job; exit 77 (a skip) when it may use fewer than N.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
n=$1
shift
mapfile -t ids < <(mw_cpu_ids)
if ((${#ids[@]} < n)); then
    echo "SKIP: this process may use ${#ids[@]} CPU(s), fewer than $n" >&2
    exit 77
fi
list=$(echo "${ids[@]:0:$n}" | tr ' ' ',')
echo "pinned to CPU(s) $list: $*"
exec taskset -c "$list" "$@"
