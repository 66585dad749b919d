#!/usr/bin/env python3
"""Every function declared by its own file's header, and nowhere else: a reader who opens
foo.h sees what foo.c offers, and who opens foo.c finds its contract in foo.h. A header
declaring other files' functions hides who depends on whom (the call cycle check reads the
calls because such headers made the include graph look clean).

- A function that foo.c or foo.cu defines and does not keep static is declared in foo.h or
  foo.cuh (same folder, same stem).
- A function declared in a header foo.h is defined in foo.c or foo.cu.
- A .c or .cu file declares no function that another file defines.
main() needs no declaration. The one structural exception, OWNS below: a kernel family's
header kernels/F.h declares its twins, the functions of kernels/ref/F.c, kernels/cpu/F.c and
kernels/cuda/F.cu, which implement the one contract F.h states. The one generated exception,
TWINS below: kernels/twins.h declares the twins of every kernel table entry through the X-macro
list kernels/kernel_list.h, which this script cannot expand; so for each op of a
`MW_KERNEL(op, fast, ...)` line there (or line `M(op)` of a `#define M(op) MW_KERNEL(op,
fast, ...)` family), a function mw_<op>_ref, mw_<op>_cpu (only when fast is
CPU) or mw_<op>_cuda defined in a file of kernels/ref, kernels/cpu or kernels/cuda counts as
declared by kernels/twins.h. ALLOWED lists single functions by name with the reason each
cannot follow the rule; keep it empty or tiny.

Prints each violation as file:line and exits 1; prints a one-line summary and exits 0.
    check_declarations.py SOURCE_ROOT"""
import re
import sys

from csource import module, sources
from verdict import verdict

# (header, defining file) pairs by pattern: the header may declare that file's functions.
OWNS = [(r"kernels/(\w+)\.h", r"kernels/(?:ref|cpu|cuda)/\1\.(?:c|cu)")]
# The twins' header and the list it is generated from.
TWINS, KERNEL_LIST = "kernels/twins.h", "kernels/kernel_list.h"
# {function: reason}: none today.
ALLOWED = {}


def owns(header, path):
    if module(header) == module(path):
        return True
    return any(re.fullmatch(h, header) and re.fullmatch(re.sub(r"\\1", re.escape(
        re.fullmatch(h, header).group(1)), d), path) for h, d in OWNS)


def twins():
    """{function name: the folder (ref, cpu, cuda) it must be defined in}, from the MW_KERNEL
    lines of kernels/kernel_list.h (read from the current directory, sources()' root)."""
    out = {}
    text = open(KERNEL_LIST, encoding="utf-8").read()
    entries = re.findall(r"^MW_KERNEL\((\w+),\s*(\w+)", text, re.M)
    # a family of entries through a one-parameter macro: #define M(op) MW_KERNEL(op, CPU, ...)
    for macro, param, fast in re.findall(
            r"^#define (\w+)\((\w+)\)[\s\\]*MW_KERNEL\(\2,\s*(\w+)", text, re.M):
        entries += [(op, fast) for op in re.findall(rf"^{macro}\((\w+)\)", text, re.M)]
    for op, fast in entries:
        for backend in ("ref", "cuda") + (("cpu",) if fast == "CPU" else ()):
            out[f"mw_{op}_{backend}"] = backend
    return out


def main(root):
    srcs = sources(root)
    if len(srcs) < 20:
        print(f"FAIL: only {len(srcs)} source files under {root}: wrong root?")
        return 1
    twin = twins()
    defined = {}  # name -> [(file, line)] of its non-static definitions outside headers
    for p, s in srcs.items():
        if p.endswith((".c", ".cu")):
            for name, (line, static) in s.defs.items():
                if not static:
                    defined.setdefault(name, []).append((p, line))
    declared = {}  # name -> [(header, line)]
    for p, s in srcs.items():
        if p.endswith((".h", ".cuh")):
            for name, line in s.decls.items():
                declared.setdefault(name, []).append((p, line))
    bad, seen = [], set()
    for name, defs in sorted(defined.items()):
        if name == "main" or name in ALLOWED:
            continue
        for p, line in defs:
            if name in twin and re.fullmatch(rf"kernels/{twin[name]}/\w+\.(?:c|cu)", p):
                continue  # declared by TWINS, generated from KERNEL_LIST
            if not any(owns(h, p) for h, _ in declared.get(name, ())):
                seen.add(name)
                elsewhere = ", ".join(f"{h}:{hl}" for h, hl in declared.get(name, ()))
                bad.append(f"{p}:{line}: {name} is declared "
                           + (f"in {elsewhere}, not " if elsewhere else "nowhere, not even ")
                           + f"in {module(p)}.h")
    for name, decls in sorted(declared.items()):
        if name in ALLOWED or name in seen:
            continue
        for h, line in decls:
            defs = defined.get(name, [])
            if name in srcs[h].defs or any(owns(h, p) for p, _ in defs):
                continue  # its own file's, or defined in the header itself (inline)
            where = ", ".join(f"{p}:{dl}" for p, dl in defs) or "nowhere in the product"
            bad.append(f"{h}:{line}: declares {name}, defined in {where}, not in {module(h)}.c")
    for p, s in srcs.items():
        if p.endswith((".c", ".cu")):
            for name, line in sorted(s.decls.items(), key=lambda kv: kv[1]):
                if name not in s.defs and name not in ALLOWED:
                    where = ", ".join(f"{d}:{dl}" for d, dl in defined.get(name, [])) or \
                        "nowhere in the product"
                    bad.append(f"{p}:{line}: declares {name}, defined in {where}: "
                               "include its header instead")
    return verdict(bad, f"{len(bad)} function(s) declared outside their own file's header",
                   f"declarations: {sum(len(d) for d in defined.values())} external functions "
                   f"in {len(srcs)} files, each declared by its own file's header")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
