#!/usr/bin/env python3
"""Files named for what they hold: no file whose name says how it came to be instead of
what is in it. A file of "graph ops" held batch normalization, pooling, padding, merges,
activations and float16 rounding; a newcomer looking for pooling could not guess it.

Every tracked file whose name (without its extension) is one of BANNED fails.

Prints each such file and exits 1; prints a one-line summary and exits 0 otherwise.
    check_file_names.py SOURCE_ROOT"""
import os
import subprocess
import sys

from verdict import verdict

# names that say nothing of their content: split the file by what it holds
BANNED = ("graphops",)


def main(root):
    files = subprocess.run(["git", "-C", root, "ls-files"], capture_output=True, text=True,
                           check=True).stdout.split()
    if not files:
        print(f"FAIL: no tracked files under {root} (not a git checkout?)")
        return 1
    stem = lambda f: os.path.basename(f).split(".")[0]
    bad = [f"{f}:1: named {stem(f)!r}: name it for what it holds" for f in files
           if stem(f) in BANNED]
    return verdict(bad, f"{len(bad)} file(s) with a banned name",
                   f"file names: {len(files)} files, none named {', '.join(BANNED)}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
