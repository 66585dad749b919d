#!/usr/bin/env python3
"""The exit-code table of docs/commands.md against the code's one list.

`mwtrain help` prints the exit codes from common/status.h's MW_STATUS_TABLE (a line per code)
and common/preempt.h's 128 + signal; the table's rows must be exactly those codes, and every
row must have a test that produces it: ROWS below names, for each row, the tests (their meson
name and script) and the line of the script that asserts the code. A row without a test, a
test that is not registered or no longer asserts the code, and a code on one side only fail.

    check_exit_codes.py MWTRAIN SRCDIR
"""
import os
import re
import subprocess
import sys

SIGNAL_ROW = "128 + signal"

# row -> [(meson test name, script under SRCDIR, regex of the line asserting the code)]
ROWS = {
    "0": [("exit-codes", "tests/mpi/test_exit_codes.sh", r"^expect version 0 "),
          ("preempt", "tests/mpi/test_preempt.sh", r"rc -eq 0 \]\]")],
    "1": [("exit-codes", "tests/mpi/test_exit_codes.sh", r"^expect internal 1 ")],
    "2": [("exit-codes", "tests/mpi/test_exit_codes.sh", r"^expect cce 2 "),
          ("hostile", "tests/mpi/test_hostile.sh", r"rc -eq 2 \]\]")],
    "3": [("exit-codes", "tests/mpi/test_exit_codes.sh", r"^escaped csvesc 3$"),
          ("hostile", "tests/mpi/test_hostile.sh", r"rc -eq 3 \]\]")],
    "4": [("exit-codes", "tests/mpi/test_exit_codes.sh", r"^expect nodata 4 "),
          ("hostile", "tests/mpi/test_hostile.sh", r"rc -eq 4 \]\]")],
    "5": [("exit-codes", "tests/mpi/test_exit_codes.sh", r"^expect badckpt 5 "),
          ("resume-optimizer", "tests/mpi/test_resume_optimizer.sh", r"rc -eq 5 ")],
    "6": [("memory", "tests/mpi/test_memory.sh", r"rc -eq 6 \]\]")],
    # a build without CUDA here; a device's own failures in the cuda suite
    "7": [("exit-codes", "tests/mpi/test_exit_codes.sh", r"^ *expect nogpu 7 "),
          ("module-", "tests/cuda/test_module_load.sh", r"rc -eq 7 ")],
    "8": [("diverge", "tests/mpi/test_diverge.sh", r"rc -eq 8 ")],
    "129": [("exit-codes", "tests/mpi/test_exit_codes.sh", r"^expect mpi 129 ")],
    "131": [("stall", "tests/mpi/test_stall.sh", r"rc -eq 131 \]\]"),
            ("signals", "tests/mpi/test_signals.sh", r"rc -eq 131 \]\]")],
    "133": [("signals", "tests/mpi/test_signals.sh", r"rc -eq 133 "),
            ("preempt", "tests/mpi/test_preempt.sh", r"rc -eq 133 \]\]")],
    SIGNAL_ROW: [("signals", "tests/mpi/test_signals.sh", r"rc -eq 143 "),
                 ("signals", "tests/mpi/test_signals.sh", r"rc -eq 130 \]\]")],
}


def help_codes(mwtrain):
    """The rows `mwtrain help` prints under its exit codes: '0', ..., and SIGNAL_ROW."""
    # Under the ASan build (tests/sanitize/unit_asan.sh) Open MPI's own allocations at exit are
    # reported as leaks (its initialisation, not mwtrain's code); this test reads the table only.
    env = dict(os.environ, ASAN_OPTIONS=os.environ.get("ASAN_OPTIONS", "") + ":detect_leaks=0")
    out = subprocess.run([mwtrain, "help"], capture_output=True, text=True, check=True,
                         env=env).stdout
    lines = out.split("exit codes", 1)[1].splitlines()[2:]
    codes = []
    for line in lines:
        m = re.match(r"^  (\d+)(\+N)?\s", line)
        if m:
            codes.append(SIGNAL_ROW if m.group(2) else m.group(1))
    return codes


def doc_rows(path):
    """The first cell of each row of the '## Exit codes' table, split into codes."""
    text = open(path, encoding="utf-8").read()
    section = text.split("\n## Exit codes\n", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        m = re.match(r"^\| ([^|]+?) \|", line)
        if m and m.group(1) not in ("code", "---"):
            cell = m.group(1)
            rows.append([cell] if cell == SIGNAL_ROW else [c.strip() for c in cell.split(",")])
    return rows


def registered(src, name, script):
    """Whether the meson.build beside script registers a test NAME (a prefix for NAME-)
    that runs it."""
    meson = open(os.path.join(src, os.path.dirname(script), "meson.build")).read()
    calls = re.split(r"\btest\(", meson)[1:]
    quoted = re.escape(name) + (r"[^']*'" if name.endswith("-") else "'")
    return any(re.match(r"\s*'" + quoted, c) and os.path.basename(script) in c for c in calls)


def main():
    mwtrain, src = sys.argv[1], sys.argv[2]
    errors = []
    code_rows = help_codes(mwtrain)
    rows = doc_rows(os.path.join(src, "docs", "commands.md"))
    doc_codes = [c for row in rows for c in row]
    for c in code_rows:
        if c not in doc_codes:
            errors.append(f"exit code {c} (mwtrain help, common/status.h) has no row in "
                          "docs/commands.md")
    for c in doc_codes:
        if c not in code_rows:
            errors.append(f"docs/commands.md's row {c} is no exit code of mwtrain help")
        if doc_codes.count(c) > 1:
            errors.append(f"docs/commands.md: {c} in more than one row")
    for c in code_rows:
        tests = ROWS.get(c, [])
        if not tests:
            errors.append(f"exit code {c}: no test produces it (ROWS)")
        for name, script, regex in tests:
            path = os.path.join(src, script)
            if not os.path.exists(path):
                errors.append(f"exit code {c}: {script} does not exist")
                continue
            if not registered(src, name, script):
                errors.append(f"exit code {c}: test '{name}' running {script} is not registered")
            if not re.search(regex, open(path).read(), re.M):
                errors.append(f"exit code {c}: {script} has no line /{regex}/ asserting it")
    for c in ROWS:
        if c not in code_rows:
            errors.append(f"ROWS lists {c}, which is no exit code")
    width = max(len(c) for c in code_rows)
    for c in code_rows:
        print(f"{c:>{width}}: " + ", ".join(f"{n} ({s})" for n, s, _ in ROWS.get(c, [])))
    for e in errors:
        print("FAIL:", e)
    print(f"{len(code_rows)} exit codes, {len(rows)} rows, {len(errors)} error(s)")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
