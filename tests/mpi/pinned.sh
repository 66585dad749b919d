#!/usr/bin/env bash
# pinned.sh N CMD...: CMD on the first N CPUs this process may use (taskset), as a cpuset or a
# launcher's binding would leave a job; exit 77 (a skip) when it may use fewer than N.
set -euo pipefail
n=$1
shift
ids=()
for r in $(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status | tr ',' ' '); do
    mapfile -t -O "${#ids[@]}" ids < <(seq "${r%-*}" "${r#*-}")
done
if ((${#ids[@]} < n)); then
    echo "SKIP: this process may use ${#ids[@]} CPU(s), fewer than $n" >&2
    exit 77
fi
list=$(echo "${ids[@]:0:$n}" | tr ' ' ',')
echo "pinned to CPU(s) $list: $*"
exec taskset -c "$list" "$@"
