#!/usr/bin/env python3
"""Tests of the TFRecord reader through its driver tests/tfrecord/tfrecord_dump.c.

    test_tfrecord.py agree DUMP BUILD_DIR   shards TensorFlow wrote (tf_write.py, run in
                                            BUILD_DIR/tf-venv; exit 77, a skip, without it)
                                            read by the driver, every record and feature
                                            compared with what TensorFlow reads back; then a
                                            control: one changed value must be reported
    test_tfrecord.py hostile CASE DUMP      one broken shard (CASES below): the driver must
                                            exit 3 with the message's parts
    test_tfrecord.py index DUMP             the record index: built, loaded, rebuilt when the
                                            shard or the index file changes, kept in a dir
    test_tfrecord.py shards DUMP            shard discovery: splits, prefixes, plain names

The hostile, index and shards tests need no TensorFlow: tfrecord_io.py writes their shards."""
import gzip
import json
import os
import struct
import subprocess
import sys
import tempfile
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tfrecord_io as tio  # noqa: E402

GOOD = [{"image": ("bytes", [b"\x89PNG" + bytes([i]) * 9]), "label": ("int64", [i])}
        for i in range(3)]


def run(dump, *args):
    p = subprocess.run([dump, *args], capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout, p.stderr


def shard_bytes(examples):
    return b"".join(tio.record(tio.example(e)) for e in examples)


def offsets(examples):
    out, off = [], 0
    for e in examples:
        out.append(off)
        off += len(tio.example(e)) + 16
    return out


def parse_dump(text):
    """{shard name: {"kind", "count", "records": {index: [offset, {key: [kind, values]}]}}}"""
    shards, cur, rec = {}, None, None
    for line in text.splitlines():
        w = line.split(" ")
        if w[0] == "shard" and len(w) == 3:
            cur = shards.setdefault(w[1], {"kind": w[2], "records": {}})
        elif w[0] == "shard" and w[2] == "records":
            cur["count"] = int(w[3])
        elif w[0] == "record":
            rec = cur["records"].setdefault(int(w[1]), [int(w[2]), {}])
        elif w[0] == "feature":
            vals = w[4:] if w[2] != "int64" else [int(v) for v in w[4:]]
            vals = ["" if v == "-" else v for v in vals] if w[2] == "bytes" else vals
            assert len(vals) == int(w[3]), line
            rec[1][w[1]] = [w[2], vals]
        elif w[0] == "index":
            cur["index"] = (w[1], int(w[2]))
    return shards


def compare(got, expected, label):
    """The mismatches between a parsed dump and expected {name: records}."""
    bad = []
    if sorted(got) != sorted(expected):
        return [f"{label}: shards {sorted(got)}, expected {sorted(expected)}"]
    for name, recs in expected.items():
        g = got[name]
        if g.get("count") != len(recs) or len(g["records"]) != len(recs):
            bad.append(f"{label} {name}: {g.get('count')} records, expected {len(recs)}")
            continue
        for i, (off, feats) in enumerate(recs):
            if g["records"].get(i) != [off, feats]:
                bad.append(f"{label} {name} record {i}: got {g['records'].get(i)}, "
                           f"expected {[off, feats]}")
    return bad


def agree(dump, build):
    py = os.path.join(build, "tf-venv", "bin", "python")
    if not os.path.exists(py) or subprocess.run([py, "-c", "import tensorflow"],
                                                capture_output=True).returncode != 0:
        print(f"SKIP: no TensorFlow venv at {os.path.dirname(os.path.dirname(py))} "
              "(tests/bench/tf_venv.sh BUILD_DIR makes it)")
        return 77
    with tempfile.TemporaryDirectory() as d:
        here = os.path.dirname(os.path.abspath(__file__))
        subprocess.run([py, os.path.join(here, "tf_write.py"), d], check=True,
                       capture_output=True, timeout=600)
        with open(os.path.join(d, "expected.json")) as f:
            exp = json.load(f)
        runs = [("dump", "tfds", "train"), ("dump", "tfds", "test"), ("dump", "garden", "train"),
                ("dump", "gzip", "train"), ("dump", "zlib/lists.tfrecord", "train"),
                ("dump", "plain", "train"), ("random", "tfds", "train"),
                ("random", "plain/lists.tfrecord", "train"),
                ("random", "garden", "train", os.path.join(d, "idx"))]
        bad, total, parsed = [], 0, []
        for mode, rel, split, *extra in runs:
            if extra:
                os.makedirs(extra[0], exist_ok=True)
            rc, out, err = run(dump, mode, os.path.join(d, rel), split, *extra)
            if rc != 0:
                bad.append(f"{mode} {rel}: exit {rc}: {err.strip()}")
                continue
            want = {os.path.basename(k): v["records"] for k, v in exp.items()
                    if k.startswith(rel + "/") or k == rel}
            want = {k: v for k, v in want.items() if "-test." not in k or split == "test"}
            want = {k: v for k, v in want.items() if "-train." not in k or split == "train"}
            got = parse_dump(out)
            bad += compare(got, want, f"{mode} {rel}")
            parsed.append((got, want, f"{mode} {rel}"))
            total += sum(len(v) for v in want.values())
        if bad:
            print("FAIL:\n  " + "\n  ".join(bad[:20]))
            return 1
        # the control: one changed label, one dropped record must both be reported
        got, want, label = parsed[0]
        first = sorted(want)[0]
        changed = json.loads(json.dumps(want))
        changed[first][0][1]["label"][1][0] += 1
        dropped = json.loads(json.dumps(want))
        dropped[first].pop()
        if not compare(got, changed, label) or not compare(got, dropped, label):
            print("FAIL: the control passed: the comparison cannot fail")
            return 1
        print(f"OK: {total} records over {len(runs)} reads agree with TensorFlow's; "
              "control (a changed label, a dropped record) reported")
        return 0


def gz_cut(data):
    z = gzip.compress(data, mtime=0)
    return z[: len(z) // 2]


def gz_bad_trailer(data):
    z = bytearray(gzip.compress(data, mtime=0))
    z[-8] ^= 0xFF  # the gzip trailer's CRC-32 of the uncompressed data
    return bytes(z)


def with_length(data, idx, length):
    """Record idx's length replaced (its CRC made to match)."""
    off = offsets(GOOD)[idx]
    n = struct.pack("<Q", length)
    return data[:off] + n + struct.pack("<I", tio.masked(n)) + data[off + 12:]


def flip(data, at):
    return data[:at] + bytes([data[at] ^ 0x01]) + data[at + 1:]


OFF = offsets(GOOD)
PLAIN = shard_bytes(GOOD)
# name: (shard bytes, driver arguments after PATH SPLIT, message parts)
CASES = {
    "length-crc": (flip(PLAIN, OFF[1] + 9), [],
                   [f"record 1 at byte offset {OFF[1]}: length CRC mismatch"]),
    "data-crc": (flip(PLAIN, OFF[2] + 14), [],
                 [f"record 2 at byte offset {OFF[2]}: data CRC mismatch"]),
    "length-past-end": (with_length(PLAIN, 1, 1000), [],
                        [f"record 1 at byte offset {OFF[1]}: length 1000 runs past the end of "
                         "the shard"]),
    "absurd-length": (with_length(PLAIN, 0, 1 << 40), [],
                      ["record 0 at byte offset 0: length 1099511627776 above the largest "
                       "record accepted (268435456 bytes)"]),
    "truncated-header": (PLAIN + b"\x05\x00\x00\x00\x00", [],
                         [f"record 3 at byte offset {len(PLAIN)}: truncated record header: 5 "
                          "of 12 bytes"]),
    "truncated-record": (PLAIN[:-3], [], ["record 2", "runs past the end of the shard"]),
    "truncated-gzip": (gz_cut(PLAIN), [], ["GZIP stream truncated after", "uncompressed bytes"]),
    "gzip-trailer": (gz_bad_trailer(PLAIN), [], ["GZIP stream corrupt", "incorrect data check"]),
    "gzip-data-crc": (gzip.compress(flip(PLAIN, OFF[2] + 14), mtime=0), [],
                      [f"record 2 at uncompressed byte offset {OFF[2]}: data CRC mismatch"]),
    "zlib-trailing": (zlib.compress(PLAIN) + b"junk", [],
                      ["4 bytes after the end of the ZLIB stream"]),
    "bad-protobuf": (tio.record(tio.example({"label": ("int64", [1])}))
                     + tio.record(b"\x0a\xff\xff\xff\xff\x0f"), [],
                     ["record 1: not a tf.train.Example (the protobuf does not parse, 6 bytes)"]),
    "missing-feature": (PLAIN, ["get", "image/encoded", "bytes"],
                        ["record 0: no feature 'image/encoded' (features: image, label)"]),
    "wrong-type": (PLAIN, ["get", "label", "bytes"],
                   ["record 0: feature 'label' is an int64 list; expected a bytes list"]),
    "empty-list": (tio.record(tio.example({"label": ("int64", [])})), ["get", "label", "int64"],
                   ["record 0: feature 'label' is an empty int64 list"]),
}


def hostile(case, dump):
    data, extra, parts = CASES[case]
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "bad.tfrecord")
        with open(path, "wb") as f:
            f.write(data)
        cmd = extra[0] if extra else "dump"
        rc, out, err = run(dump, cmd, path, "train", *extra[1:])
    missing = [p for p in [path] + parts if p not in err]
    if rc != 3 or missing:
        print(f"FAIL {case}: exit {rc} (expected 3), stderr {err.strip()!r}; missing {missing}")
        return 1
    print(f"OK {case}: exit 3: {err.strip()}")
    return 0


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def index(dump):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "s.tfrecord")
        with open(path, "wb") as f:
            f.write(PLAIN)
        seen = []
        for step in ("first", "again", "append", "corrupt", "dir"):
            if step == "append":
                with open(path, "ab") as f:
                    f.write(tio.record(tio.example({"label": ("int64", [9])})))
            if step == "corrupt":
                with open(path + ".mwidx", "r+b") as f:
                    f.seek(44)
                    f.write(b"\xff")
            extra = [os.path.join(d, "idx")] if step == "dir" else []
            if extra:
                os.makedirs(extra[0])
            rc, out, err = run(dump, "random", path, "train", *extra)
            check(rc == 0, f"{step}: exit {rc}: {err}")
            got = parse_dump(out)["s.tfrecord"]
            seen.append(got["index"])
            rc2, out2, _ = run(dump, "dump", path, "train")
            check(rc2 == 0 and parse_dump(out2)["s.tfrecord"]["records"] == got["records"],
                  f"{step}: the records read by offset differ from those read in order")
        want = [("rebuilt", 3), ("loaded", 3), ("rebuilt", 4), ("rebuilt", 4), ("rebuilt", 4)]
        check(seen == want, f"index states {seen}, expected {want}")
        check(os.path.exists(os.path.join(d, "idx", "s.tfrecord.mwidx")), "no index in the dir")
        with open(path + ".mwidx", "rb") as f:
            head = f.read(40)
        check(head[:8] == b"MWTFRIX1" and struct.unpack("<Q", head[8:16])[0] ==
              os.path.getsize(path) and struct.unpack("<Q", head[32:40])[0] == 4,
              "the index file's header (magic, shard size, count)")
        # a compressed shard has no index: read in order
        gz = os.path.join(d, "g.tfrecord")
        with open(gz, "wb") as f:
            f.write(gzip.compress(PLAIN))
        rc, out, err = run(dump, "random", gz, "train")
        check(rc == 0 and parse_dump(out)["g.tfrecord"]["count"] == 3, f"gzip: {rc} {err}")
    print(f"OK: index states {seen}; GZIP shard read in order")
    return 0


def write(d, name, examples=GOOD):
    with open(os.path.join(d, name), "wb") as f:
        f.write(shard_bytes(examples))


def shards(dump):
    with tempfile.TemporaryDirectory() as d:
        for k in range(3):
            write(d, f"toy-train.tfrecord-{k:05d}-of-00003", GOOD[:k + 1])
        write(d, "toy-test.tfrecord-00000-of-00001")
        write(d, "toy-train.tfrecord-00000-of-00003.mwidx", [])  # not a shard
        cases = [((d, "train"), ["toy-train.tfrecord-0000%d-of-00003" % k for k in range(3)]),
                 ((d, "test"), ["toy-test.tfrecord-00000-of-00001"]),
                 ((os.path.join(d, "toy-train.tfrecord"), "x"),
                  ["toy-train.tfrecord-0000%d-of-00003" % k for k in range(3)])]
        g = os.path.join(d, "garden")
        os.makedirs(g)
        write(g, "train-00000-of-00002")
        write(g, "train-00001-of-00002")
        write(g, "validation-00000-of-00001")
        cases.append(((g, "train"), ["train-00000-of-00002", "train-00001-of-00002"]))
        p = os.path.join(d, "plain")
        os.makedirs(p)
        write(p, "b.tfrecord")
        write(p, "a.tfrecords")
        write(p, "notes.txt")
        cases.append(((p, "train"), ["a.tfrecords", "b.tfrecord"]))
        for args, names in cases:
            rc, out, err = run(dump, "dump", *args)
            got = [line.split()[1] for line in out.splitlines()
                   if line.startswith("shard ") and len(line.split()) == 3]
            check(rc == 0 and got == names, f"{args}: exit {rc} {err}, shards {got} != {names}")
        os.remove(os.path.join(d, "toy-train.tfrecord-00001-of-00003"))
        errors = [((d, "train"), [f"{d}: TFDS shard toy-train.tfrecord-00001-of-00003 is missing "
                                  "(2 of 3 found)"]),
                  ((d, "validation"), [f"{d}: no validation shards (TFDS splits there: test, "
                                       "train)"]),
                  ((os.path.join(d, "nope.tfrecord"), "train"), ["nope.tfrecord: no such file"])]
        for args, parts in errors:
            rc, out, err = run(dump, "dump", *args)
            want_rc = 4 if "no such" in parts[0] else 3
            check(rc == want_rc and all(x in err for x in parts),
                  f"{args}: exit {rc} (expected {want_rc}), stderr {err!r}, expected {parts}")
    print(f"OK: {len(cases)} discoveries, {len(errors)} refusals")
    return 0


def main(argv):
    if argv[1] == "agree":
        return agree(argv[2], argv[3])
    if argv[1] == "hostile":
        return hostile(argv[2], argv[3])
    try:
        return {"index": index, "shards": shards}[argv[1]](argv[2])
    except AssertionError as e:
        print(f"FAIL: {e}")
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
