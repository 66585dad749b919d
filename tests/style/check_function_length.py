#!/usr/bin/env python3
"""No function over 80 lines outside tests/ (docs/contributing.md): a function longer than a
screen does several things, and each of them deserves a name.

A function is a line that opens a body at column 0 ("{" alone, clang-format's style for
function definitions) back to its first signature line (the previous line that starts at
column 0 with a letter) and on to the "}" at column 0 that closes it; its length counts both.
Every C and CUDA source file git tracks, tests/ aside.

Prints each function over the limit with its length and exits 1; prints a one-line summary
and exits 0 otherwise.
    check_function_length.py SOURCE_ROOT"""
import re
import subprocess
import sys

LIMIT = 80


def functions(text):
    """(name, first line, length) of each function definition in text."""
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        if lines[i] == "{" and i > 0:
            j = i - 1
            while j > 0 and not re.match(r"[A-Za-z_]", lines[j]):
                j -= 1
            k = i + 1
            while k < len(lines) and lines[k] != "}":
                k += 1
            m = re.search(r"([A-Za-z_][A-Za-z_0-9]*)\s*\(", lines[j])
            yield (m.group(1) if m else lines[j].strip()), j + 1, k - j + 1
            i = k
        i += 1


def main(root):
    files = subprocess.run(["git", "-C", root, "ls-files", "*.c", "*.cu"], capture_output=True,
                           text=True, check=True).stdout.split()
    files = [f for f in files if not f.startswith("tests/")]
    if not files:
        print(f"FAIL: no tracked C files under {root} (not a git checkout?)")
        return 1
    bad, count = [], 0
    for f in files:
        with open(f"{root}/{f}", encoding="utf-8", errors="replace") as fh:
            for name, line, n in functions(fh.read()):
                count += 1
                if n > LIMIT:
                    bad.append(f"{f}:{line}: {name} is {n} lines (at most {LIMIT})")
    for b in bad:
        print(b)
    if bad:
        print(f"{len(bad)} function(s) over {LIMIT} lines: split them")
        return 1
    print(f"function length: {count} functions in {len(files)} files, none over {LIMIT} lines")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
