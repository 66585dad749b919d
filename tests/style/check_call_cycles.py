#!/usr/bin/env python3
"""No call cycle between files: the include graph can be acyclic while the calls go round (a
header declaring functions that other files define hides it), so this reads the calls.

File A calls file B when a function of A calls, by name, a function that B defines and does
not keep static (csource.py reads both). A .c or .cu file and its .h or .cuh count as one
module, as in check_includes.py. A call through a table's function pointer names no function
and is no edge: that is how a lower file calls a higher one without a cycle. A name that A
defines itself (static or not) stays in A. Each group of modules that reach each other (a
strongly connected component) is printed once, with the files in it and, per edge inside
it, the first call (file:line, function): removing enough of those edges opens it.

Prints each cycle and exits 1; prints a one-line summary and exits 0 otherwise.
    check_call_cycles.py SOURCE_ROOT"""
import sys

from csource import module, sources


def edges(srcs):
    """{(from module, to module): [(file, line, function), ...]}"""
    definers = {}
    for p, s in srcs.items():
        for name, (_, static) in s.defs.items():
            if not static:
                definers.setdefault(name, set()).add(module(p))
    local = {}
    for p, s in srcs.items():
        local.setdefault(module(p), set()).update(s.defs)
    out = {}
    for p, s in srcs.items():
        a = module(p)
        for name, line in s.calls:
            if name in local[a]:
                continue
            for b in sorted(definers.get(name, ())):
                if b != a:
                    out.setdefault((a, b), []).append((p, line, name))
    return out


def components(nodes, succ):
    """Tarjan's strongly connected components of more than one node, each sorted."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        # iterative, so a long chain cannot exceed Python's recursion limit
        work = [(v, iter(sorted(succ.get(v, ()))))]
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        while work:
            n, it = work[-1]
            w = next(it, None)
            if w is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[n])
                if low[n] == index[n]:
                    comp = []
                    while True:
                        x = stack.pop()
                        on.discard(x)
                        comp.append(x)
                        if x == n:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
            elif w not in index:
                index[w] = low[w] = counter[0]
                counter[0] += 1
                stack.append(w)
                on.add(w)
                work.append((w, iter(sorted(succ.get(w, ())))))
            elif w in on:
                low[n] = min(low[n], index[w])

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return sorted(out)


def main(root):
    srcs = sources(root)
    if len(srcs) < 20:
        print(f"FAIL: only {len(srcs)} source files under {root}: wrong root?")
        return 1
    calls = edges(srcs)
    succ = {}
    for a, b in calls:
        succ.setdefault(a, set()).add(b)
    nodes = {module(p) for p in srcs}
    comps = components(nodes, succ)
    for comp in comps:
        names = set(comp)
        inside = sorted((a, b) for a, b in calls if a in names and b in names)
        print(f"FAIL: call cycle among {len(comp)} files ({len(inside)} edges): "
              + ", ".join(comp))
        for a, b in inside:
            sites = calls[(a, b)]
            f, line, fn = sites[0]
            fns = sorted({s[2] for s in sites} - {fn})
            more = f" (+{len(fns)} more: {', '.join(fns[:3])}{', ...' if len(fns) > 3 else ''})" \
                if fns else ""
            print(f"  {f}:{line}: {fn} -> {b}{more}")
    if comps:
        print(f"{len(comps)} call cycle(s) between files: move the function, or call it "
              "through a table")
        return 1
    print(f"call graph: {len(srcs)} files, {len(nodes)} modules, {len(calls)} edges, no cycle")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
