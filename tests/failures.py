#!/usr/bin/env python3
"""Name each test that failed or timed out in meson's JSON test logs, with the end of its output.

deploy/local/test.sh prints this last, so the end of a long run (all a CI page may show) says
which test failed and why, not only how many. Usage: failures.py LOG.json [LOG.json ...]; a log
that does not exist (a pass that did not run) is passed over. Exit status 0 either way.
"""
import json
import sys

TAIL = 30  # lines of a failed test's output: its own message is at the end


def failed(path):
    rows = []
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                try:  # a run cut short may leave its last line half written
                    r = json.loads(line)
                except ValueError:
                    continue
                if r.get("result") not in ("OK", "SKIP", "EXPECTEDFAIL"):
                    rows.append(r)
    except FileNotFoundError:
        return []
    return rows


def main(paths):
    for path in paths:
        for r in failed(path):
            print(f"FAILED {r['name']} ({r['result']}, exit {r.get('returncode')}, "
                  f"{r.get('duration', 0):.0f} s; {path})")
            text = (r.get("stdout") or "") + (r.get("stderr") or "")
            for line in text.rstrip("\n").split("\n")[-TAIL:]:
                print(f"  | {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
