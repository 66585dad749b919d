#!/usr/bin/env python3
"""The project's include graph (docs/design.md, docs/contributing.md): run in the
'style' suite.

- No include cycles, counting a .c file and its .h as one module (worker/train.c including
  chief.h while chief.h includes train.h is a cycle even though no header includes itself).
- Arrows point down the folder table: common <- kernels <- cluster <- worker; kernels never
  see MPI, cluster never sees the model, common sees nothing of the project.
- No MPI, jansson or CUDA runtime header in common/ or kernels/ headers (the CUDA sources
  under kernels/cuda/*.cu and their .cuh may use CUDA).
- Inside worker/, the model stands below the formats it is read from and the data it is fed:
  nothing under worker/model/ includes worker/keras/ or worker/data/ (FORBIDDEN).

Prints each violation and exits 1; prints a one-line summary and exits 0 otherwise.
    check_includes.py SOURCE_ROOT"""
import os
import re
import sys

ORDER = {"common": 0, "kernels": 1, "cluster": 2, "worker": 3}
EXTS = (".c", ".h", ".cu", ".cuh")
# folder -> the folders its files may not include, though the folder table allows them
FORBIDDEN = {"worker/model/": ("worker/keras/", "worker/data/")}


def main():
    root = sys.argv[1]
    os.chdir(root)
    files = []
    for top in ORDER:
        for d, _, names in os.walk(top):
            files += [os.path.join(d, n) for n in names if n.endswith(EXTS)]
    if len(files) < 20:
        print(f"FAIL: only {len(files)} source files under {root}: wrong root?")
        return 1
    bad = []
    graph = {}
    mod = lambda p: os.path.splitext(p)[0]
    for f in sorted(files):
        text = open(f, encoding="utf-8").read()
        for m in re.finditer(r'^\s*#\s*include\s+"([^"]+)"', text, re.M):
            inc, line = m.group(1), text.count("\n", 0, m.start(1)) + 1
            if not os.path.exists(inc):
                continue
            top_f, top_i = f.split("/")[0], inc.split("/")[0]
            if top_i in ORDER and ORDER[top_i] > ORDER[top_f]:
                bad.append(f"{f}:{line}: includes {inc}: {top_f}/ may not see {top_i}/")
            for below, above in FORBIDDEN.items():
                if f.startswith(below) and inc.startswith(above):
                    bad.append(f"{f}:{line}: includes {inc}: {below} may not see "
                               + " or ".join(above))
            if mod(inc) != mod(f):
                graph.setdefault(mod(f), set()).add(mod(inc))
        if f.startswith(("common/", "kernels/")) and f.endswith(".h"):
            for sys_inc in re.findall(r"^\s*#\s*include\s+<([^>]+)>", text, re.M):
                if sys_inc in ("mpi.h", "jansson.h", "cuda_runtime.h", "cuda_runtime_api.h",
                               "nccl.h", "cublas_v2.h", "cudnn.h"):
                    bad.append(f"{f}: includes <{sys_inc}>: no MPI, jansson or CUDA types here")
    # cycles: depth-first search, reporting each cycle once by its smallest rotation
    seen_cycles = set()
    state = {}

    def visit(n, stack):
        state[n] = 1
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 1:
                cyc = stack[stack.index(m):]
                k = cyc.index(min(cyc))
                seen_cycles.add(tuple(cyc[k:] + cyc[:k]))
            elif not state.get(m):
                visit(m, stack + [m])
        state[n] = 2

    for n in sorted(graph):
        if not state.get(n):
            visit(n, [n])
    for c in sorted(seen_cycles):
        bad.append("include cycle: " + " -> ".join(c + (c[0],)))
    for b in bad:
        print("FAIL:", b)
    if not bad:
        print(f"include graph: {len(files)} files, {len(graph)} modules, no cycle, "
              "every include points down the folder table")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
