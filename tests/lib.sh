# The helpers the shell tests under tests/ share; a test sources it first thing:
#   . "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
#   check CONDITION WHAT   eval CONDITION: count a pass, or a failure printed as "FAIL: WHAT"
#   check_cmd CMD ARG...   the same for a command, printed as "FAIL: CMD ARG..."
#   finish [LABEL]         print "[LABEL: ]P passed, F failed"; its status is 0 when none
#                          failed (a test ends with it, so its exit status says so too)
#   mw_cpu_ids             the CPUs this process may use (Cpus_allowed_list), one a line
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
