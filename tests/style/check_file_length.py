#!/usr/bin/env python3
"""No code file over 800 lines: a file that long holds several concerns, and each of them
deserves a file named for it (as no function is over 80 lines, check_function_length.py).

Every C, CUDA and Python file git tracks under the product's folders, at most 800 lines; and
under tests/, at most 1,800: a test file is a table of cases around one module (test_kernels.c
walks every kernel entry, test_cuda.c every CUDA twin), longer than the code it checks but
still one concern, and a 2,000-line test file is as hard to find one's way in as a 2,000-line
source file.

Prints each file over the limit, as file:line of its first line past it, with its length,
and exits 1; prints a one-line summary and exits 0 otherwise.
    check_file_length.py SOURCE_ROOT"""
import subprocess
import sys

from verdict import verdict

LIMIT = 800
TEST_LIMIT = 1800  # files under tests/
TOPS = ("cluster/", "common/", "kernels/", "worker/", "tests/")
EXTS = (".c", ".h", ".cu", ".cuh", ".py")


def main(root):
    files = subprocess.run(["git", "-C", root, "ls-files", *TOPS], capture_output=True,
                           text=True, check=True).stdout.split()
    files = [f for f in files if f.endswith(EXTS)]
    if not files:
        print(f"FAIL: no tracked code files under {root} (not a git checkout?)")
        return 1
    bad = []
    for f in files:
        with open(f"{root}/{f}", encoding="utf-8", errors="replace") as fh:
            n = sum(1 for _ in fh)
        limit = TEST_LIMIT if f.startswith("tests/") else LIMIT
        if n > limit:
            bad.append((n, f"{f}:{limit + 1}: {n} lines (at most {limit})"))
    return verdict([b for _, b in sorted(bad, reverse=True)],
                   f"{len(bad)} file(s) over their limit: split them by concern",
                   f"file length: {len(files)} code files, none over {LIMIT} lines "
                   f"({TEST_LIMIT} under tests/)")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
