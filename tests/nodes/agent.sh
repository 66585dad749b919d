#!/usr/bin/env bash
# Open MPI's remote shell for the `nodes` suite (--mca plm_rsh_agent tests/nodes/agent.sh), in
# place of ssh: mpirun calls it as `agent.sh HOST WORD...` with the daemon's command line as
# words for a remote shell, and it runs that command with bash inside the node's namespaces
# (network namespace <prefix>nK, a fresh UTS namespace with hostname nodeK, the node's own
# disk; see lib.sh). HOST is nodeK or its address 10.R.0.K. Needs MWN_PREFIX, MWN_ROOT and
# MWN_DISK from the harness (mpirun passes its environment on to the agent).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
while [[ $# -gt 0 && $1 == -* ]]; do shift; done # ssh-style options (-x ...), if any
host=${1:?usage: agent.sh HOST COMMAND...}
shift
case $host in
node[0-9]*) k=${host#node} ;;
10.*.0.[0-9]*) k=${host##*.} ;;
*)
    echo "agent.sh: unknown host '$host' (expected nodeK or 10.R.0.K)" >&2
    exit 255
    ;;
esac
exec ip netns exec "${MWN_PREFIX:?}n$k" unshare --uts --mount --propagation private \
    "$here/enter.sh" "node$k" "${MWN_ROOT:?}/disk/node$k" "${MWN_DISK:?}" bash -c "$*"
