#!/usr/bin/env python3
"""Check --timeline files (Chrome traces) as chrome://tracing and Perfetto read them:

    check_timeline.py [--prefetched] STEPS FILE PID [REQUIRED-NAME...]

FILE must be valid JSON, {"traceEvents": [...]}, with a process_name metadata event for PID;
every other event a "B"/"E" duration event of that pid with a numeric ts, ts never decreasing
in file order, each "E" closing the innermost open "B" of the same name, nothing left open.
Global steps 0..STEPS-1 each have, nested in their "step" event, the events "forward/backward",
"all-reduce" and "update" (args.step = the step) and every REQUIRED-NAME. --prefetched (a GPU
run of one micro-batch per device): every step but the last has "data" inside its "update" (the
next step's batch, assembled while the update runs), and no step but the first has "data" inside
its "forward/backward". Prints what it found; exit 0, or 1 with each failure."""
import json
import sys


def main():
    args = sys.argv[1:]
    prefetched = args[:1] == ["--prefetched"]
    args = args[1:] if prefetched else args
    steps, path, pid = int(args[0]), args[1], int(args[2])
    required = ["forward/backward", "all-reduce", "update"] + args[3:]
    fails = []
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        print(f"FAIL: {path}: not valid JSON: {e}")
        return 1
    events = doc.get("traceEvents") if isinstance(doc, dict) else None
    if not isinstance(events, list):
        print(f"FAIL: {path}: no traceEvents list")
        return 1
    meta = [e for e in events if e.get("ph") == "M"]
    if not any(e.get("name") == "process_name" and e.get("pid") == pid for e in meta):
        fails.append(f"no process_name metadata event for pid {pid}")
    last, stack, per_step, names, parents = None, [], {}, set(), {}
    for i, e in enumerate(x for x in events if x.get("ph") != "M"):
        if e.get("ph") not in ("B", "E") or e.get("pid") != pid:
            fails.append(f"event {i}: not a B/E event of pid {pid}: {e}")
            continue
        ts = e.get("ts")
        if not isinstance(ts, (int, float)):
            fails.append(f"event {i}: ts {ts!r}")
            continue
        if last is not None and ts < last:
            fails.append(f"event {i} ({e['name']}): ts {ts} before the previous {last}")
        last = ts
        names.add(e["name"])
        if e["ph"] == "B":
            stack.append(e["name"])
            step = e.get("args", {}).get("step", -1)
            if step >= 0 and "step" in stack:
                per_step.setdefault(step, set()).add(e["name"])
                if len(stack) > 1:
                    parents.setdefault(step, set()).add((stack[-2], e["name"]))
        elif not stack or stack[-1] != e["name"]:
            fails.append(f"event {i}: E of {e['name']} while {stack[-1:] or 'nothing'} is open")
        else:
            stack.pop()
    if stack:
        fails.append(f"left open at the end: {stack}")
    for s in range(steps):
        missing = [n for n in required if n not in per_step.get(s, set())]
        if missing:
            fails.append(f"step {s}: no {missing} inside it")
    for s in range(steps) if prefetched else []:
        inside = parents.get(s, set())
        if s + 1 < steps and ("update", "data") not in inside:
            fails.append(f"step {s}: the next step's data is not assembled inside its update")
        if s + 1 == steps and ("update", "data") in inside:
            fails.append(f"step {s}, the last: data inside its update")
        if s > 0 and ("forward/backward", "data") in inside:
            fails.append(f"step {s}: data inside its forward/backward (not prefetched)")
    if len(per_step) != steps:
        fails.append(f"{len(per_step)} steps in the file, want {steps}")
    print(f"{path}: {len(events)} events, {len(per_step)} steps, names {sorted(names)}")
    for f in fails[:20]:
        print("FAIL:", f)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
