# The helpers the shell tests under tests/ share; a test sources it first thing:
#   . "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
#   check CONDITION WHAT   eval CONDITION: count a pass, or a failure printed as "FAIL: WHAT"
#   check_cmd CMD ARG...   the same for a command, printed as "FAIL: CMD ARG..."
#   finish [LABEL]         print "[LABEL: ]P passed, F failed"; its status is 0 when none
#                          failed (a test ends with it, so its exit status says so too)
#   mw_cpu_ids             the CPUs this process may use (Cpus_allowed_list), one a line
#   mw_end_runs DIR PID... kill -9 the PIDs and every process of a run whose checkpoints go
#                          under DIR (--checkpoint-dir DIR/...), then remove DIR: an EXIT trap
#   mw_cgroup_make LIMIT   a memory cgroup mwtrain-test-PID of LIMIT bytes (512M, 1G): cgroup
#                          v2 memory.max (no swap), else the v1 memory controller's limit;
#                          its path in $mw_cg, "cgroup v2 memory.max" or "cgroup v1
#                          memory.limit_in_bytes" in $mw_cg_kind. Status 1 with the reason in
#                          $mw_cg_skip when none can be made (not root, no memory controller)
#   mw_cgroup_limit LIMIT  set its limit
#   mw_in_cgroup CMD ARG.. run CMD inside it (its status); "${mw_cg_exec[@]}" CMD ARG.. is
#                          the same as a command line (for timeout, time)
#   mw_cgroup_remove       end what is left in it and remove it: call it from the EXIT trap
# and exports the Open MPI environment of tests/openmpi.env (run as root, oversubscribe).
while IFS='=' read -r _mw_key _mw_value; do
    if [[ $_mw_key == [A-Z]* ]]; then export "$_mw_key=$_mw_value"; fi
done <"$(dirname "${BASH_SOURCE[0]}")/openmpi.env"
unset _mw_key _mw_value
pass=0 fail=0
check() { if eval "$1"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $2"; fi; }
check_cmd() { if "$@"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $*"; fi; }
finish() {
    echo "${1:+$1: }$pass passed, $fail failed"
    ((fail == 0))
}
mw_cpu_ids() {
    local r
    for r in $(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status | tr ',' ' '); do
        seq "${r%-*}" "${r#*-}"
    done
}
mw_end_runs() {
    local dir=$1 p
    shift
    for p in "$@"; do kill -9 "$p" 2>/dev/null; done
    pkill -9 -f -- "--checkpoint-dir $dir/" 2>/dev/null
    rm -rf "$dir"
}
mw_cg="" mw_cg_kind="" mw_cg_skip=""
mw_cgroup_make() {
    local root=/sys/fs/cgroup err
    if (($(id -u) != 0)); then
        mw_cg_skip="not root: cannot make a memory cgroup"
    elif [[ -f $root/cgroup.controllers ]]; then
        if ! grep -qw memory $root/cgroup.controllers; then
            mw_cg_skip="cgroup v2 without the memory controller ($root/cgroup.controllers)"
        elif ! err=$(mkdir "$root/mwtrain-test-$$" 2>&1); then
            mw_cg_skip="cannot make $root/mwtrain-test-$$: $err"
        else
            mw_cg=$root/mwtrain-test-$$ mw_cg_kind="cgroup v2 memory.max"
            [[ -f $mw_cg/memory.max ]] ||
                mw_cg_skip="the memory controller is not enabled for children of $root"
        fi
    elif [[ -f $root/memory/memory.limit_in_bytes ]]; then
        if ! err=$(mkdir "$root/memory/mwtrain-test-$$" 2>&1); then
            mw_cg_skip="cannot make $root/memory/mwtrain-test-$$: $err"
        else
            mw_cg=$root/memory/mwtrain-test-$$ mw_cg_kind="cgroup v1 memory.limit_in_bytes"
        fi
    else
        mw_cg_skip="no cgroup v2 memory controller and no cgroup v1 memory mount under $root"
    fi
    mw_cg_exec=(bash -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' _ "$mw_cg")
    [[ -z $mw_cg_skip ]] && mw_cgroup_limit "$1"
}
mw_cgroup_limit() {
    if [[ $mw_cg_kind == "cgroup v2"* ]]; then
        echo "$1" >"$mw_cg/memory.max"
        echo 0 >"$mw_cg/memory.swap.max" 2>/dev/null
    else # the swap limit (when the kernel accounts swap) is never below the memory limit
        echo "$1" >"$mw_cg/memory.memsw.limit_in_bytes" 2>/dev/null
        echo "$1" >"$mw_cg/memory.limit_in_bytes"
        echo "$1" >"$mw_cg/memory.memsw.limit_in_bytes" 2>/dev/null
    fi
    return 0
}
mw_in_cgroup() { "${mw_cg_exec[@]}" "$@"; }
mw_cgroup_remove() {
    [[ -n $mw_cg && -d $mw_cg ]] || return 0
    local p
    # the runs were waited for; give the kernel a moment to let go of them
    for _ in $(seq 1 100); do
        [[ -z $(cat "$mw_cg/cgroup.procs" 2>/dev/null) ]] && break
        sleep 0.1
    done
    # anything still in it was started by this test (nothing else joins this cgroup)
    for p in $(cat "$mw_cg/cgroup.procs" 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
    for _ in $(seq 1 100); do
        rmdir "$mw_cg" 2>/dev/null && break
        sleep 0.1
    done
    [[ -d $mw_cg ]] && echo "WARNING: could not remove $mw_cg"
    return 0
}
