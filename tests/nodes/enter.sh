#!/usr/bin/env bash
# The last step into a node of the `nodes` suite (lib.sh's node_exec and agent.sh run it inside
# `ip netns exec NS unshare --uts --mount`): set this UTS namespace's hostname, bind the node's
# own directory over the shared "local disk" path in this mount namespace, run the command on
# the node's CPUs (lib.sh's MWN_ROOT/cpus-HOSTNAME, next to MWN_ROOT/disk/HOSTNAME = NODE_DIR).
#   enter.sh HOSTNAME NODE_DIR DISK_PATH CMD...
set -euo pipefail
hostname "$1"
mount --bind "$2" "$3"
cpus=$(dirname "$(dirname "$2")")/cpus-$1
shift 3
[[ -s $cpus ]] && exec taskset -c "$(cat "$cpus")" "$@"
exec "$@"
