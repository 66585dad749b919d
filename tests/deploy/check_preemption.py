#!/usr/bin/env python3
"""The launchers in deploy/ keep what preemption needs (docs/running.md, "Preemption and divergence").

Checked, each failure one line naming the file and what is wrong:
  - k8s/single-node-job.yaml: podFailurePolicy's FIRST rule ignores the DisruptionTarget
    condition (Kubernetes applies the first rule that matches: a FailJob rule before it would
    fail the Job on an eviction); 133 is ignored (replaced without counting) before any
    FailJob rule; FailJob covers mwtrain's 1-8 and not 133; restartPolicy Never;
    terminationGracePeriodSeconds above mwtrain's default --preemption-grace; the container's
    PID 1 is deploy/mpirun/run.sh (`exec .../mpirun/run.sh`), which turns SIGTERM into the
    SIGUSR1 that mpirun forwards;
  - k8s/mpijob.yaml: the Launcher and the Worker set terminationGracePeriodSeconds above the
    grace; the Worker's PID 1 is a command that traps TERM and passes it to mwtrain (not the
    operator's default sshd); the Launcher traps TERM and sends mpirun SIGUSR1, and retries 133
    without counting it;
  - slurm/train.sbatch: `#SBATCH --signal=TERM@...` (to the job step's tasks, not B:), a TERM
    trap in the script, and 133 requeued apart from the failure budget;
  - mpirun/mca-params.conf: odls_base_sigkill_timeout is set (README says why 1 s).
The grace comes from `mwtrain help train` (its "--preemption-grace ... (default N)").
Usage: check_preemption.py DEPLOY_DIR MWTRAIN
"""
import re
import subprocess
import sys

import yaml


def grace_default(mwtrain):
    out = subprocess.run([mwtrain, "help", "train"], capture_output=True, text=True).stdout
    m = re.search(r"--preemption-grace SECONDS\s.*?\(default (\d+)\)", out, re.S)
    if not m:
        raise SystemExit("check_preemption: `mwtrain help train` does not state "
                         "--preemption-grace's default:\n" + out)
    return int(m.group(1))


def main():
    deploy, mwtrain = sys.argv[1:3]
    grace = grace_default(mwtrain)
    bad = []

    def need(ok, where, what):
        if not ok:
            bad.append("%s: %s" % (where, what))

    where = "k8s/single-node-job.yaml"
    job = yaml.safe_load(open("%s/%s" % (deploy, where)))
    rules = job["spec"]["podFailurePolicy"]["rules"]
    first = rules[0]
    need(first.get("action") == "Ignore" and any(
        c.get("type") == "DisruptionTarget" for c in first.get("onPodConditions", [])), where,
        "the first podFailurePolicy rule must Ignore DisruptionTarget (the first match wins), "
        "got %s" % first)
    fail_at = next((k for k, r in enumerate(rules) if r.get("action") == "FailJob"), None)
    ign133 = next((k for k, r in enumerate(rules) if r.get("action") == "Ignore" and
                   133 in r.get("onExitCodes", {}).get("values", [])), None)
    need(ign133 is not None and (fail_at is None or ign133 < fail_at), where,
         "exit 133 (preempted, saved) must be ignored before any FailJob rule")
    if fail_at is not None:
        values = set(rules[fail_at]["onExitCodes"]["values"])
        need(set(range(1, 9)) <= values and 133 not in values, where,
             "FailJob must cover 1-8 and not 133, got %s" % sorted(values))
    pod = job["spec"]["template"]["spec"]
    need(pod.get("restartPolicy") == "Never", where, "podFailurePolicy needs restartPolicy Never")
    need(pod.get("terminationGracePeriodSeconds", 30) > grace, where,
         "terminationGracePeriodSeconds must exceed --preemption-grace (%d s)" % grace)
    script = "\n".join(pod["containers"][0].get("args", []))
    need(re.search(r"^\s*exec\s+\S*mpirun/run\.sh\b", script, re.M) is not None, where,
         "PID 1 must be deploy/mpirun/run.sh (exec it): it turns SIGTERM into SIGUSR1")

    where = "k8s/mpijob.yaml"
    mj = yaml.safe_load(open("%s/%s" % (deploy, where)))
    specs = mj["spec"]["mpiReplicaSpecs"]
    for role in ("Launcher", "Worker"):
        spec = specs[role]["template"]["spec"]
        need(spec.get("terminationGracePeriodSeconds", 30) > grace, where,
             "%s: terminationGracePeriodSeconds must exceed --preemption-grace" % role)
    worker = specs["Worker"]["template"]["spec"]["containers"][0]
    wscript = "\n".join(worker.get("args", []))
    need("command" in worker and re.search(r"trap\s+\S+\s+TERM", wscript) is not None and
         re.search(r"(pkill|kill)\s+-TERM\s.*mwtrain", wscript) is not None, where,
         "Worker: PID 1 must trap TERM and pass it to the mwtrain ranks (sshd never does)")
    lscript = "\n".join(specs["Launcher"]["template"]["spec"]["containers"][0].get("args", []))
    need(re.search(r"trap\s+\S+\s+TERM", lscript) is not None and
         re.search(r"kill\s+-USR1", lscript) is not None, where,
         "Launcher: must trap TERM and send mpirun SIGUSR1")
    need(re.search(r"rc\s*!=\s*133", lscript) is not None, where,
         "Launcher: 133 must be retried without counting against MAX_RESTARTS")

    where = "slurm/train.sbatch"
    sb = open("%s/%s" % (deploy, where)).read()
    need(re.search(r"^#SBATCH --signal=TERM@\d+\s*$", sb, re.M) is not None, where,
         "#SBATCH --signal=TERM@SECONDS (to the tasks: no B:) is missing")
    need(re.search(r"^trap\s+.*\sTERM\s*$", sb, re.M) is not None, where,
         "the script must trap TERM (a handler, so it reaches the requeue)")
    need(re.search(r"rc\s*==\s*133", sb) is not None, where,
         "133 must be requeued apart from MAX_REQUEUES")

    where = "mpirun/mca-params.conf"
    conf = open("%s/%s" % (deploy, where)).read()
    need(re.search(r"^odls_base_sigkill_timeout\s*=\s*\d+", conf, re.M) is not None, where,
         "odls_base_sigkill_timeout must be stated")

    for b in bad:
        print("FAIL " + b)
    print("%d problem(s) in the launchers' preemption settings" % len(bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
