"""The TensorBoard event files mwtrain writes, read by TensorBoard's own reader.

A short run (two epochs, a checkpoint mid-epoch, then one more epoch resumed into the same
summary directory) writes events and metrics.csv; tensorboard's EventAccumulator must load
the events and hold exactly the scalars of metrics.csv: the same tags (the CSV's columns
after step and epoch), and for each tag the same steps and values (the events carry the value as
float32, the CSV as a double with 9 digits: they agree within one float32 step, the most
that rounding the double twice can move it).
"""
import os

import numpy as np
from tensorboard.backend.event_processing import event_accumulator

import oracle as o

d = o.workdir()
logs, ck = os.path.join(d, "logs"), os.path.join(d, "ck")
common = ["--steps-per-epoch", "20", "--test-examples", "500", "--checkpoint-dir", ck,
          "--summary-dir", logs, "--progress", "none", "--checkpoint-every-epochs", "1"]
o.mwtrain("train", "--epochs", "2", *common, cwd=d)
o.mwtrain("train", "--epochs", "3", "--resume", *common, cwd=d)

acc = event_accumulator.EventAccumulator(logs, size_guidance={event_accumulator.SCALARS: 0})
acc.Reload()
tags = sorted(acc.Tags()["scalars"])
head, rows = o.read_csv(os.path.join(logs, "metrics.csv"))
want = sorted(head[2:])
o.check(tags == want, f"scalar tags {tags} are metrics.csv's columns {want}")
o.check(len(rows) == 3, f"metrics.csv has 3 rows ({len(rows)})")
for tag in want:
    col = head.index(tag)
    ev = [(e.step, np.float32(e.value)) for e in acc.Scalars(tag)] if tag in tags else []
    csv = [(int(r[0]), np.float32(r[col])) for r in rows]
    same = len(ev) == len(csv) and all(
        s1 == s2 and abs(v1 - v2) <= np.spacing(abs(v2)) for (s1, v1), (s2, v2) in zip(ev, csv))
    o.check(same, f"{tag}: TensorBoard reads {len(ev)} points (step, value) equal to "
            f"metrics.csv's {len(csv)}" + ("" if same else f": {ev} vs {csv}"))
o.finish()
