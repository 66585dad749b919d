#!/usr/bin/env python3
"""Embed a text file in the binary as a C array: embed.py INPUT OUTPUT.c SYMBOL.

Writes `const char SYMBOL[]` (the bytes and a terminating NUL) and
`const size_t SYMBOL_nbytes` (without the NUL), declared in worker/keras/keras.h. Byte
values rather than a string literal: no escaping rules, no compiler limits on
literal length, the same output on every platform.
"""
import sys


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: embed.py INPUT OUTPUT.c SYMBOL")
    src, dst, sym = sys.argv[1:]
    with open(src, "rb") as f:
        data = f.read()
    lines = [f"/* Generated from {src.split('/')[-1]} by worker/models/embed.py; do not edit. */",
             "#include \"worker/keras/keras.h\"", "",
             f"const char {sym}[{len(data) + 1}] = {{"]
    body = list(data) + [0]
    for i in range(0, len(body), 16):
        lines.append("    " + ", ".join(f"0x{b:02x}" for b in body[i:i + 16]) + ",")
    lines += ["};", f"const size_t {sym}_nbytes = {len(data)};", ""]
    with open(dst, "w", newline="\n") as f:
        f.write("\n".join(lines))


if __name__ == "__main__":
    main()
