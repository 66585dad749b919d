#!/usr/bin/python3
"""Load a safetensors file with NumPy and print "name shape sum" per tensor.

Usage: export_read.py FILE
The whole reader is the first five lines of load(); the rest checks the file
the way the safetensors library does. Exits 77 (skip) without NumPy.
"""
import json
import struct
import sys

try:
    import numpy as np
except ImportError:
    print("numpy is not installed; skipping")
    sys.exit(77)


def load(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    meta = header.pop("__metadata__", {})
    tensors, end = {}, 0
    for name, e in header.items():
        begin, stop = e["data_offsets"]
        if e["dtype"] != "F32" or begin != end or stop - begin != 4 * int(np.prod(e["shape"])):
            raise ValueError("%s: bad entry %s" % (name, e))
        tensors[name] = np.frombuffer(body[begin:stop], dtype="<f4").reshape(e["shape"])
        end = stop
    if end != len(body):
        raise ValueError("%d data bytes, tensors cover %d" % (len(body), end))
    return meta, tensors


def main(path):
    meta, tensors = load(path)
    if meta.get("format") != "mwtrain":
        sys.exit("%s: __metadata__ is %s" % (path, meta))
    for name, t in tensors.items():
        shape = ",".join(str(d) for d in t.shape)
        print("%s [%s] %.9g" % (name, shape, t.astype(np.float64).sum()))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: export_read.py FILE")
    main(sys.argv[1])
