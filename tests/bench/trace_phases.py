"""A training step's profile from an mwtrain timeline (--timeline, docs/formats.md): the median
over steps of each top-level phase's time (step, forward/backward, the data assembly inside it,
all-reduce, update), from the global step FROM on (to leave the first epoch's first touch of
every buffer out). Plain Python: tests/bench/gpu_first_run.sh runs it on a GPU host.

  trace_phases.py TRACE [FROM]

prints one line: "step S ms: forward/backward F, data D, all-reduce A, update U (median of N
steps from step FROM)", and exits 1 when the trace holds no complete step from FROM on."""
import json
import statistics
import sys

PHASES = ("step", "forward/backward", "data", "all-reduce", "update")


def main():
    path, first = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 0
    text = open(path).read()
    if not text.rstrip().endswith("]}"):  # a run cut short leaves the JSON open: its whole lines
        lines = text.rstrip().split("\n")
        if not lines[-1].rstrip().endswith(("}", "},")):
            lines.pop()  # a line cut mid-way
        text = "\n".join(lines).rstrip().rstrip(",") + "]}"
    events = json.loads(text)["traceEvents"]
    open_at, per_step = {}, {}
    for e in events:
        step = e.get("args", {}).get("step", -1)
        if e.get("ph") not in ("B", "E") or e["name"] not in PHASES or step < first:
            continue
        key = (e["name"], step)
        if e["ph"] == "B":
            open_at[key] = e["ts"]
        elif key in open_at:
            t = per_step.setdefault(step, {})
            t[e["name"]] = t.get(e["name"], 0.0) + (e["ts"] - open_at.pop(key)) / 1000.0
    steps = [t for t in per_step.values() if "step" in t]
    if not steps:
        print("no complete step from step %d on in %s" % (first, path))
        return 1
    med = {p: statistics.median(t.get(p, 0.0) for t in steps) for p in PHASES}
    print("step %.1f ms: forward/backward %.1f, data %.1f, all-reduce %.1f, update %.1f (median of "
          "%d steps from step %d)" % (med["step"], med["forward/backward"], med["data"],
                                      med["all-reduce"], med["update"], len(steps), first))
    return 0


if __name__ == "__main__":
    sys.exit(main())
