#!/usr/bin/env bash
# check_preemption.py on deploy/ passes, and fails on copies broken the ways that matter: the
# DisruptionTarget rule after the FailJob rule (e80cd35's order: an evicted pod failed the
# whole Job), 133 among FailJob's codes, a Worker left with sshd as PID 1, and a Slurm script
# without --signal.
#   test_preemption_rules.sh MWTRAIN [SOURCE_ROOT]
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
mw=$1 src=${2:-$MW_SRCDIR}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
out=$(python3 "$here/check_preemption.py" "$src/deploy" "$mw" 2>&1)
rc=$?
check '[[ $rc -eq 0 ]]' "deploy/ as shipped: $out"
# broken NAME PYTHON-EDIT EXPECTED: a copy of deploy/ edited, which the checker must refuse
broken() {
    want=$3
    rm -rf "$tmp/d" && cp -r "$src/deploy" "$tmp/d"
    python3 -c "$2" "$tmp/d"
    out=$(python3 "$here/check_preemption.py" "$tmp/d" "$mw" 2>&1)
    rc=$?
    check '[[ $rc -ne 0 ]] && grep -qF -- "$want" <<<"$out"' "$1: must fail with '$want' (exit $rc): $out"
}
broken "FailJob before DisruptionTarget" '
import sys, re
p = sys.argv[1] + "/k8s/single-node-job.yaml"; s = open(p).read()
a = s.index("      - action: Ignore\n        onPodConditions:"); b = s.index("      - action: Ignore\n        onExitCodes:")
dis = s[a:b]; s = s[:a] + s[b:]
s = s.replace("          values: [1, 2, 3, 4, 5, 6, 7, 8]\n", "          values: [1, 2, 3, 4, 5, 6, 7, 8]\n" + dis)
open(p, "w").write(s)' "the first podFailurePolicy rule must Ignore DisruptionTarget"
broken "133 fails the Job" '
import sys
p = sys.argv[1] + "/k8s/single-node-job.yaml"; s = open(p).read()
open(p, "w").write(s.replace("values: [1, 2, 3, 4, 5, 6, 7, 8]", "values: [1, 2, 3, 4, 5, 6, 7, 8, 133]"))' \
    "FailJob must cover 1-8 and not 133"
broken "Worker PID 1 sshd" '
import sys, re
p = sys.argv[1] + "/k8s/mpijob.yaml"; s = open(p).read()
a = s.index("              command: [\"/bin/bash\", \"-c\"]\n              args:\n                - |\n                  /usr/sbin/sshd")
b = s.index("              resources:", a)
open(p, "w").write(s[:a] + s[b:])' "Worker: PID 1 must trap TERM"
broken "no --signal" '
import sys
p = sys.argv[1] + "/slurm/train.sbatch"; s = open(p).read()
open(p, "w").write(s.replace("#SBATCH --signal=TERM@120", "#SBATCH --comment=x"))' "--signal=TERM@SECONDS"
finish
