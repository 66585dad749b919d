#!/usr/bin/env python3
"""The Open MPI environment of the tests is set in one place, tests/openmpi.env (tests/lib.sh
exports it to the shell tests and deploy/local/env.sh, tests/meson.build reads it into
mpi_env): no shell script or meson file under tests/ or deploy/local/ sets one of its
variables itself, so a change to it is one line.

ELSEWHERE lists the files that must set them on their own, with the reason.

Prints each place that sets one, as file:line, and exits 1; prints a one-line summary and
exits 0 otherwise.
    check_openmpi_env.py SOURCE_ROOT"""
import re
import subprocess
import sys

from verdict import verdict

THE_PLACE = "tests/openmpi.env"
# files that set them without the tests' file: {path: reason}
ELSEWHERE = {
    # writes the env.sh of a self-contained bundle for a host without this repository's tests
    "tests/bench/gpu_bundle.sh": "the bundle's own env.sh",
    # tests what mwtrain does with and without OMPI_MCA_pml
    "tests/mpi/test_singleton.sh": "the variable under test",
}


def main(root):
    with open(f"{root}/{THE_PLACE}", encoding="utf-8") as fh:
        names = [ln.split("=")[0] for ln in fh if re.match(r"[A-Z]\w*=", ln)]
    if not names:
        print(f"FAIL: {THE_PLACE} sets no variable")
        return 1
    files = subprocess.run(["git", "-C", root, "ls-files", "tests", "deploy/local"],
                           capture_output=True, text=True, check=True).stdout.split()
    files = [f for f in files if f.endswith((".sh", "meson.build")) and f not in ELSEWHERE]
    setting = re.compile(r"\b(" + "|".join(names) + r")(=|'\s*[:,])")
    bad = []
    for f in files:
        with open(f"{root}/{f}", encoding="utf-8", errors="replace") as fh:
            for i, line in enumerate(fh, 1):
                if setting.search(line) and not line.lstrip().startswith("#"):
                    bad.append(f"{f}:{i}: sets {setting.search(line).group(1)}: "
                               f"it comes from {THE_PLACE}")
    return verdict(bad, f"{len(bad)} place(s) setting the Open MPI environment outside "
                   f"{THE_PLACE}", f"Open MPI environment: {len(names)} variables, set only in "
                   f"{THE_PLACE} ({len(files)} scripts and meson files checked)")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
