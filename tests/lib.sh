# The helpers the shell tests under tests/ share; a test sources it first thing:
#   . "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
#   check CONDITION WHAT   eval CONDITION: count a pass, or a failure printed as "FAIL: WHAT"
#   check_cmd CMD ARG...   the same for a command, printed as "FAIL: CMD ARG..."
#   finish [LABEL]         print "[LABEL: ]P passed, F failed"; its status is 0 when none
#                          failed (a test ends with it, so its exit status says so too)
#   mw_cpu_ids             the CPUs this process may use (Cpus_allowed_list), one a line
#   mw_end_runs DIR PID... kill -9 the PIDs and every process of a run whose checkpoints go
#                          under DIR (--checkpoint-dir DIR/...), then remove DIR: an EXIT trap
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
