#!/usr/bin/env python3
"""No silent string check in the C tests: assert_non_null(strstr(hay, needle)) says only that a
pointer was NULL when it fails; expect_contains(hay, needle) (tests/util.h) prints the place
and both strings. Lists each use under tests/ and exits 1; exits 0 otherwise.
    check_silent_asserts.py SOURCE_ROOT"""
import subprocess
import sys

root = sys.argv[1] if len(sys.argv) > 1 else "."
files = subprocess.run(["git", "-C", root, "ls-files", "tests/*.c", "tests/**/*.c"],
                       capture_output=True, text=True, check=True).stdout.split()
bad = []
for f in sorted(set(files)):
    with open(f"{root}/{f}", encoding="utf-8", errors="replace") as fh:
        for n, line in enumerate(fh, 1):
            if "assert_non_null(strstr(" in line.replace(" ", ""):
                bad.append(f"{f}:{n}: {line.strip()}")
for b in bad:
    print(b)
if bad:
    print(f"{len(bad)} silent string check(s): use expect_contains(hay, needle)")
    sys.exit(1)
print(f"silent asserts: none in {len(set(files))} C test files")
