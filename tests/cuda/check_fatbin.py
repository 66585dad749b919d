#!/usr/bin/env python3
"""What the CUDA module's fat binary holds, read without a GPU and without cuobjdump (which the
toolkit here lacks): machine code (SASS, an ELF per kernel file) for every architecture of
-Dgpu_arch, PTX of the last one (so a newer GPU can JIT-compile it), and line information
(-lineinfo: each ELF has .debug_line and .nv_debug_line_sass, for compute-sanitizer).

The .nv_fatbin section is a sequence of fat binaries: a header (magic 0xBA55ED50, u16 version,
u16 header size, u64 size of the entries) and entries, each a header (u16 kind: 1 PTX, 2 ELF;
u16; u32 header size; u64 payload size; ...; u32 architecture at byte 28; u64 flags at byte 40)
followed by its payload.

    check_fatbin.py MODULE.so ARCHS      (ARCHS as -Dgpu_arch: "80;90")
Exit 0 when all holds, 1 with each failure printed, 77 (skip) without objcopy."""
import shutil
import struct
import subprocess
import sys
import tempfile

MAGIC = 0xBA55ED50


def entries(blob):
    off = 0
    while off + 16 <= len(blob):
        magic, _version, hsz, size = struct.unpack_from("<IHHQ", blob, off)
        if magic != MAGIC:
            off += 8  # the fat binaries are 8-byte aligned
            continue
        e, end = off + hsz, off + hsz + size
        while e + 48 <= end:
            kind, _, ehsz, psz = struct.unpack_from("<HHIQ", blob, e)
            arch = struct.unpack_from("<I", blob, e + 28)[0]
            yield kind, arch, blob[e + ehsz : e + ehsz + psz]
            e += ehsz + psz
        off = end


def main():
    module, archs = sys.argv[1], [int(a) for a in sys.argv[2].split(";") if a]
    objcopy = shutil.which("objcopy")
    if not objcopy:
        print("SKIP: no objcopy (binutils) to extract the .nv_fatbin section")
        return 77
    with tempfile.NamedTemporaryFile() as tmp:
        subprocess.run([objcopy, "-O", "binary", "--only-section=.nv_fatbin", module, tmp.name],
                       check=True)
        blob = open(tmp.name, "rb").read()
    found = list(entries(blob))
    fails = []
    elf = [(a, p) for k, a, p in found if k == 2]
    ptx = [a for k, a, _ in found if k == 1]
    print(f"{module}: {len(elf)} ELF entries for sm_{sorted({a for a, _ in elf})}, "
          f"{len(ptx)} PTX entries for compute_{sorted(set(ptx))}")
    if not found:
        fails.append("no fat binary in the .nv_fatbin section")
    for a in archs:
        if not any(x == a for x, _ in elf):
            fails.append(f"no machine code for sm_{a}")
    if archs and archs[-1] not in ptx:
        fails.append(f"no PTX for compute_{archs[-1]}: a GPU newer than sm_{archs[-1]} "
                     "could not run the kernels")
    nolines = [a for a, p in elf if b".debug_line" not in p or b".nv_debug_line_sass" not in p]
    if nolines:
        fails.append(f"{len(nolines)} of {len(elf)} ELF entries without line information "
                     "(.debug_line, .nv_debug_line_sass): built without -lineinfo")
    for f in fails:
        print("FAIL:", f)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
