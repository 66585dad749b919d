# Real nodes on one machine, for the `nodes` suite (sourced by its tests; bash, root).
#
# nodes_up N makes N "nodes" and a launcher, each a network namespace of its own:
#
#   launcher (mpirun)  node1 (chief)  node2 ...      addresses 10.R.0.K/24: the launcher .254,
#        eth0             eth0         eth0            node K .K; R from the test's pid
#         |                |            |
#        l0 ------------- b1 --------- b2 ...  br0   all on one bridge, in a namespace of its
#                                                    own (the "switch"): the host's network
#                                                    is never touched.
#
# Each node runs on CPUs of its own, as separate machines would: nodes_up splits the CPUs this
# process may use (its affinity list) among the nodes, node K's share in $MWN_ROOT/cpus-nodeK,
# and enter.sh runs the node's commands under taskset with it (with fewer CPUs than nodes,
# node K gets CPU (K-1) mod the count); the launcher keeps them all. Without this, 2 nodes x 2
# ranks on a 2-core machine would each see 2 CPUs for 2 ranks and busy-wait on one another.
#
# Every name starts with a prefix unique to the run (mwn<pid>-), so two runs never collide.
# Commands run on node K through node_exec (ip netns exec + a fresh UTS namespace with hostname
# nodeK + a mount namespace in which the node's own directory $MWN_ROOT/disk/nodeK is bound
# over $MWN_ROOT/disk/here: "the local disk", so a file written by a process on node K to
# $MWN_DISK is visible at $MWN_ROOT/disk/nodeK only). Open MPI reaches the nodes through
# tests/nodes/agent.sh (plm_rsh_agent, in place of ssh); names resolve through
# /etc/netns/<namespace>/hosts, which `ip netns exec` binds over /etc/hosts inside the
# namespace only (the host's /etc/hosts is never edited).
#
# nodes_down (run by the EXIT/INT/TERM trap that nodes_up installs) kills every process in
# every namespace of the run, deletes the namespaces (their links go with them), removes
# /etc/netns/<prefix>* and the temporary directory, and fails loudly if anything with the
# prefix is left. Where namespaces cannot be made (not root, no ip/unshare, no CAP_SYS_ADMIN)
# the test exits 77 with the reason: a skip, never a pass.
#
# Functions: nodes_up N, node_exec K CMD..., node_pids K, mwn_mpirun ARGS... (mpirun in the
# launcher over NP ranks; MWN_NP, MWN_PPN), mwn_all_pids, mwn_wait_gone SECONDS,
# mwn_check_clean. Variables: MWN_PREFIX, MWN_ROOT (temporary directory), MWN_DISK,
# MWN_SUBNET, MWN_NODES.

MWN_HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
declare -F mw_cpu_ids >/dev/null || . "$MWN_HERE/../lib.sh" # check, finish, mw_cpu_ids
MWN_PREFIX=mwn$$-
MWN_ROOT=""
MWN_NODES=0
MWN_R=$((($$ % 200) + 20))
MWN_SUBNET=10.$MWN_R.0.0/24
MWN_BR=${MWN_PREFIX}br
MWN_LAUNCHER=${MWN_PREFIX}l
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1

mwn_skip() {
    echo "SKIP: $*" >&2
    exit 77
}

mwn_ns() { # K -> the namespace of node K (0 = the launcher)
    if (($1 == 0)); then echo "$MWN_LAUNCHER"; else echo "${MWN_PREFIX}n$1"; fi
}

# Every process in any namespace of this run (pids, one a line).
mwn_all_pids() {
    local k
    for ((k = 0; k <= MWN_NODES; k++)); do
        ip netns pids "$(mwn_ns "$k")" 2>/dev/null
    done
}

node_pids() { ip netns pids "$(mwn_ns "$1")" 2>/dev/null; }

nodes_down() {
    local rc=$? k left
    trap - EXIT INT TERM
    [[ -z $MWN_ROOT ]] && return "$rc"
    # twice: a process may fork while the first kill runs
    for _ in 1 2; do
        for k in $(mwn_all_pids); do kill -9 "$k" 2>/dev/null; done
        sleep 0.2
    done
    for ((k = 0; k <= MWN_NODES; k++)); do ip netns del "$(mwn_ns "$k")" 2>/dev/null; done
    ip netns del "$MWN_BR" 2>/dev/null
    rm -rf /etc/netns/"$MWN_PREFIX"* 2>/dev/null
    if [[ -z ${KEEP:-} ]]; then rm -rf "$MWN_ROOT"; else echo "kept $MWN_ROOT" >&2; fi
    left=$(mwn_leftovers)
    if [[ -n $left ]]; then
        echo "FAIL: left behind by the harness: $left" >&2
        ((rc == 0)) && rc=1
    fi
    exit "$rc"
}

# Anything with this run's prefix still on the machine: namespaces, host links, /etc/netns.
mwn_leftovers() {
    {
        ip netns list 2>/dev/null | awk '{print $1}' | grep "^$MWN_PREFIX" | sed 's/^/netns /'
        ip -o link 2>/dev/null | awk -F': ' '{print $2}' | grep "^$MWN_PREFIX" | sed 's/^/link /'
        ls -d /etc/netns/"$MWN_PREFIX"* 2>/dev/null | sed 's/^/file /'
    } | tr '\n' ' '
}

nodes_up() { # N
    local n=$1 k ns
    ((EUID == 0)) || mwn_skip "network namespaces need root (running as uid $EUID)"
    for c in ip unshare mount mpirun; do
        command -v "$c" >/dev/null || mwn_skip "$c not found"
    done
    trap nodes_down EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    MWN_ROOT=$(mktemp -d /tmp/mwnodes.XXXXXX)
    MWN_DISK=$MWN_ROOT/disk/here
    mkdir -p "$MWN_DISK"
    if ! ip netns add "$MWN_BR" 2>"$MWN_ROOT/err"; then
        MWN_ROOT_ERR=$(cat "$MWN_ROOT/err")
        mwn_skip "cannot make a network namespace: $MWN_ROOT_ERR"
    fi
    MWN_NODES=$n
    if ! ip netns exec "$MWN_BR" unshare --uts --mount true 2>"$MWN_ROOT/err"; then
        mwn_skip "cannot make UTS/mount namespaces: $(cat "$MWN_ROOT/err")"
    fi
    ip -n "$MWN_BR" link add br0 type bridge
    ip -n "$MWN_BR" link set br0 up
    {
        echo "127.0.0.1 localhost"
        echo "10.$MWN_R.0.254 launcher"
        for ((k = 1; k <= n; k++)); do echo "10.$MWN_R.0.$k node$k"; done
    } >"$MWN_ROOT/hosts"
    for ((k = 0; k <= n; k++)); do
        ns=$(mwn_ns "$k")
        ip netns add "$ns"
        # the node's end is eth0 inside its namespace; the switch's end is b<K> (l0: launcher)
        local sw=b$k addr=10.$MWN_R.0.$k
        ((k == 0)) && sw=l0 addr=10.$MWN_R.0.254
        ip -n "$MWN_BR" link add "$sw" type veth peer name eth0 netns "$ns"
        ip -n "$MWN_BR" link set "$sw" master br0 up
        ip -n "$ns" link set lo up
        ip -n "$ns" addr add "$addr/24" dev eth0
        ip -n "$ns" link set eth0 up
        # as deploy/mpirun/README.md asks of the nodes: TCP gives up on a peer after ~13 s of
        # unanswered retransmissions (default 15 retries: ~15 min), so a cut-off daemon that
        # still had output in flight to mpirun ends too (keepalives only probe idle links)
        ip netns exec "$ns" sysctl -qw net.ipv4.tcp_retries2=5
        mkdir -p /etc/netns/"$ns" "$MWN_ROOT/disk/$(mwn_name "$k")"
        cp "$MWN_ROOT/hosts" /etc/netns/"$ns"/hosts
    done
    mwn_split_cpus "$n"
    if ! mwn_wait_links; then
        echo "FAIL: the nodes' links did not come up within 10 s" >&2
        exit 1
    fi
    export MWN_PREFIX MWN_ROOT MWN_DISK
    echo "nodes: $n + launcher in namespaces $MWN_PREFIX*, subnet $MWN_SUBNET"
}

# Node K's share of the CPUs into $MWN_ROOT/cpus-nodeK (a list for taskset -c).
mwn_split_cpus() { # N
    local n=$1 k per ids
    mapfile -t ids < <(mw_cpu_ids)
    ((${#ids[@]} > 0)) || return 0
    per=$((${#ids[@]} / n))
    for ((k = 1; k <= n; k++)); do
        if ((per >= 1)); then
            echo "${ids[@]:$(((k - 1) * per)):$per}" | tr ' ' ','
        else
            echo "${ids[$(((k - 1) % ${#ids[@]}))]}"
        fi >"$MWN_ROOT/cpus-node$k"
    done
}

# Every node's link carries: its eth0 has a carrier (LOWER_UP) and its port on the bridge
# forwards (a link just made or brought back up needs a moment). At most 10 s; returns 1 if
# some link does not come up.
mwn_wait_links() {
    local k sw ok=0 up
    for ((k = 0; k <= MWN_NODES; k++)); do
        sw=b$k
        ((k == 0)) && sw=l0
        up=1
        for _ in $(seq 1 100); do
            if ip -n "$(mwn_ns "$k")" -o link show eth0 2>/dev/null | grep -q LOWER_UP &&
                ip -n "$MWN_BR" -d -o link show "$sw" 2>/dev/null | grep -q "state forwarding"; then
                up=0
                break
            fi
            sleep 0.1
        done
        ((up == 0)) || ok=1
    done
    return $ok
}

mwn_name() { if (($1 == 0)); then echo launcher; else echo "node$1"; fi; }

# node_exec K CMD...: CMD on node K (0: the launcher) with hostname nodeK and the node's disk.
node_exec() {
    local k=$1 name
    name=$(mwn_name "$1")
    shift
    ip netns exec "$(mwn_ns "$k")" unshare --uts --mount --propagation private \
        "$MWN_HERE/enter.sh" "$name" "$MWN_ROOT/disk/$name" "$MWN_DISK" "$@"
}

# The Open MPI options of every launch: deploy/'s fail-fast settings (mca-params.conf), ssh
# replaced by agent.sh, TCP limited to the bridge.
mwn_mca() {
    echo --tune "$MWN_HERE/../../deploy/mpirun/mca-params.conf" --mca plm_rsh_agent "$MWN_HERE/agent.sh" --mca plm_rsh_no_tree_spawn 1 \
        --mca btl self,vader,tcp --mca btl_tcp_if_include "$MWN_SUBNET" \
        --mca oob_tcp_if_include "$MWN_SUBNET"
}

# A hostfile of nodes 1..N with PPN slots each, nodes named in order ("node1 slots=2").
mwn_hostfile() { # FILE NODES PPN
    local k
    : >"$1"
    for ((k = 1; k <= $2; k++)); do echo "node$k slots=$3" >>"$1"; done
}

# mpirun in the launcher over nodes 1..NODES x PPN: mwn_mpirun NODES PPN [mpirun args...]
# ONEDNN_MAX_CPU_ISA, when set (deploy/local/test.sh's rerun under AVX2), reaches every rank.
mwn_mpirun() {
    local nn=$1 ppn=$2 isa=()
    shift 2
    [[ -n ${ONEDNN_MAX_CPU_ISA:-} ]] && isa=(-x ONEDNN_MAX_CPU_ISA)
    mwn_hostfile "$MWN_ROOT/hostfile-$nn-$ppn" "$nn" "$ppn"
    # shellcheck disable=SC2046
    node_exec 0 mpirun $(mwn_mca) --hostfile "$MWN_ROOT/hostfile-$nn-$ppn" -n $((nn * ppn)) \
        --map-by slot --bind-to none "${isa[@]}" "$@"
}

# Wait until no process is left in any namespace of the run (at most SECONDS); prints the
# seconds it took (one decimal) and returns 1 on time-out.
mwn_wait_gone() { # SECONDS [since: epoch seconds with fraction]
    local limit=$1 t0=${2:-$(date +%s.%N)} now
    while :; do
        now=$(date +%s.%N)
        if [[ -z $(mwn_all_pids) ]]; then
            awk -v a="$t0" -v b="$now" 'BEGIN { printf "%.1f\n", b - a }'
            return 0
        fi
        if awk -v a="$t0" -v b="$now" -v l="$limit" 'BEGIN { exit !(b - a > l) }'; then
            awk -v a="$t0" -v b="$now" 'BEGIN { printf "%.1f\n", b - a }'
            return 1
        fi
        sleep 0.2
    done
}

# The processes left in the namespaces, for a failure message ("node2: 123 orted ...").
mwn_describe_pids() {
    local k p
    for ((k = 0; k <= MWN_NODES; k++)); do
        for p in $(node_pids "$k"); do
            printf 'ns%d:%s:%s ' "$k" "$p" "$(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | cut -c1-60)"
        done
    done
}
