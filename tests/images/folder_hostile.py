#!/usr/bin/env python3
"""Hostile image folders and TFRecord shards given to `mwtrain train --data DIR` (and to
tests/images/data_load, which opens --data as mwtrain does): each case must end with the exit
code of its status (common/status.h: MW_EDATA 3, MW_EUNSUPPORTED 2) and a message that names
the file (the folder, the shard and record) and says what was expected, quickly, never hanging.
A broken image that the opening does not read (any but the first training image) is met while
batches are assembled: the run must end with exit 3 on 1 rank (with and without a decoding
pool) and under `mpirun -n 2` (a failure on one rank ends the whole job). Standard library
only: PNG files by zlib and struct, shards by tests/tfrecord/tfrecord_io.py, the one real
JPEG from tests/fuzz/corpus/image/.

    folder_hostile.py CASE MWTRAIN DATA_LOAD     (CASES below)
"""
import gzip
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tfrecord"))
import tfrecord_io as tio  # noqa: E402

JPEG = os.path.join(HERE, "..", "fuzz", "corpus", "image", "rgb.jpg")  # 16 x 16 RGB
SIDE = 16
QUICK = 60  # seconds: a failure found while assembling a batch ends the job within this


def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(
        ">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def png(w=SIDE, h=SIDE, seed=0, declare=None):
    """An 8-bit RGB PNG of w x h pixels; declare: (W, H) written in IHDR instead."""
    rows = b"".join(b"\0" + bytes((x * 7 + y * 13 + seed * 31 + k) & 255
                                  for x in range(w) for k in range(3)) for y in range(h))
    dw, dh = declare or (w, h)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", dw, dh, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


def folder(root, per=6, classes="ab"):
    """A good folder: train/ and test/ of class folders of per (train) and 2 (test) PNGs."""
    for split, n in (("train", per), ("test", 2)):
        for c in classes:
            os.makedirs(os.path.join(root, split, c), exist_ok=True)
            for i in range(n):
                write(os.path.join(root, split, c, "%03d.png" % i), png(seed=i + ord(c)))


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def example(image, label, image_key="image/encoded", label_key="image/class/label"):
    feats = {}
    if image_key:
        feats[image_key] = ("bytes", [image])
    if label_key:
        feats[label_key] = ("int64", [label])
    return tio.example(feats)


def shards(root, records_by_split, compress=False):
    """Each split's records (serialized Examples) as two shards NAME-SPLIT.tfrecord-0000I-of-
    00002 (GZIP-compressed whole with compress)."""
    os.makedirs(root, exist_ok=True)
    for split, recs in records_by_split.items():
        half = (len(recs) + 1) // 2
        for s, part in enumerate((recs[:half], recs[half:])):
            data = b"".join(tio.record(r) for r in part)
            path = os.path.join(root, "hostile-%s.tfrecord-%05d-of-00002" % (split, s))
            write(path, gzip.compress(data) if compress else data)


def good_records(n, classes=2):
    return [example(png(seed=i), i % classes) for i in range(n)]


class Run:
    def __init__(self, args, rc, out, err, secs):
        self.args, self.rc, self.out, self.err, self.secs = args, rc, out, err, secs

    def __str__(self):
        return (f"{' '.join(self.args)}: exit {self.rc} after {self.secs:.1f} s; "
                f"stderr: {self.err.strip()[-600:]!r}")


def run(args, timeout=QUICK):
    """args' exit code and output. Under AddressSanitizer (the unit suite's sanitizer pass) the
    leak check is off for these whole-program runs: Open MPI, OpenBLAS and their unloaded
    plugins keep allocations until exit by design; every other sanitizer error still fails."""
    t0 = time.monotonic()
    env = dict(os.environ)
    env["ASAN_OPTIONS"] = (env.get("ASAN_OPTIONS", "") + ":detect_leaks=0").lstrip(":")
    try:
        p = subprocess.run(args, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return Run(args, "timeout", "", f"did not end within {timeout} s", timeout)
    return Run(args, p.returncode, p.stdout, p.stderr, time.monotonic() - t0)


def train(mw, data, ranks=1, extra=()):
    args = [mw, "train", "--data", data, "--image-size", "%dx%d" % (SIDE, SIDE), "--epochs", "1",
            "--batch-per-replica", "4", "--progress", "none", "--checkpoint-dir",
            "%s-ck%d" % (data, ranks), *extra]
    return run(["mpirun", "-n", str(ranks), *args] if ranks > 1 else args)


def expect(r, code, parts, what):
    """r ended with exit code and its stderr holds every part; returns failures."""
    missing = [p for p in parts if p not in r.err]
    if r.rc != code or missing:
        return [f"{what}: expected exit {code} and {missing or parts} in stderr; got {r}"]
    line = next((ln for ln in r.err.splitlines() if parts[0] in ln), r.err.strip())
    print(f"OK {what}: exit {code} in {r.secs:.1f} s: {line.strip()}")
    return []


def in_training(mw, data, code, parts):
    """A failure met while batches are assembled: 1 rank (the compute threads decoding, then a
    decoding pool of 2 threads), and mpirun -n 2."""
    fails = []
    for ranks, extra in ((1, ()), (1, ("--decode-threads", "2")), (2, ())):
        r = train(mw, data, ranks, extra)
        fails += expect(r, code, parts, " ".join(["mwtrain train", *extra, f"({ranks} rank(s))"]))
    return fails


def case_truncated_png(mw, dl, work):
    folder(work)
    bad = os.path.join(work, "train", "b", "004.png")
    with open(bad, "rb") as f:
        data = f.read()
    write(bad, data[:len(data) // 2])
    return in_training(mw, work, 3, [bad, "PNG", "truncated"])


def case_truncated_first(mw, dl, work):
    """The first training image is read at the opening for the default --image-size."""
    folder(work)
    bad = os.path.join(work, "train", "a", "000.png")
    write(bad, png()[:40])
    r = run([dl, "--split", "train", work])
    return expect(r, 3, [bad, "PNG", "truncated"], "data_load without --image-size")


def case_corrupt_jpeg(mw, dl, work):
    folder(work)
    bad = os.path.join(work, "train", "a", "002.jpg")
    garbage = bytes((i * 151 + 17) & 255 for i in range(3000))
    write(bad, b"\xff\xd8\xff" + garbage)
    fails = in_training(mw, work, 3, [bad, "JPEG", "libjpeg cannot decode"])
    with open(JPEG, "rb") as f:  # the real JPEG, its entropy-coded data overwritten
        data = bytearray(f.read())
    data[len(data) // 2:len(data) - 2] = garbage[:len(data) - 2 - len(data) // 2]
    write(bad, bytes(data))
    return fails + in_training(mw, work, 3, [bad, "JPEG", "libjpeg cannot decode"])


def case_text_jpg(mw, dl, work):
    folder(work)
    bad = os.path.join(work, "train", "b", "003.jpg")
    write(bad, b"this is a text file, not a JPEG\n")
    return in_training(mw, work, 3, [bad, "not an image", "74 68 69 73",
                                           "expected the signature"])


def case_fifo(mw, dl, work):
    """A FIFO named like an image: refused (exit 4, I/O), never opened to block on."""
    folder(work)
    bad = os.path.join(work, "train", "b", "002.png")
    os.unlink(bad)
    os.mkfifo(bad)
    return in_training(mw, work, 4, [bad, "is a FIFO, not a regular file"])


def case_broken_link(mw, dl, work):
    """A link named like an image whose target is gone: a file to os.walk, read, refused."""
    folder(work)
    bad = os.path.join(work, "train", "a", "003.png")
    os.unlink(bad)
    os.symlink("gone.png", bad)
    return in_training(mw, work, 4, [bad, "cannot open: No such file or directory"])


def case_bomb(mw, dl, work):
    """60000 x 60000 declared in a file of a few hundred bytes: refused before any pixel buffer
    (3.6e9 pixels, 10.8 GB as RGB) exists; the runs' peak memory stays far below it."""
    folder(work)
    bad = os.path.join(work, "train", "a", "005.png")
    write(bad, png(declare=(60000, 60000)))
    fails = in_training(mw, work, 3, [bad, "60000 x 60000", "limit of 134217728 pixels",
                                            "refused before decoding"])
    # mwtrain's own peak, measured on it alone (a wait4 on that one process): the children's
    # maximum of this script would also count mpirun and whatever else it ran
    pid = os.fork()
    if pid == 0:
        fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.execv(mw, [mw, "train", "--data", work, "--epochs", "1", "--progress", "none",
                      "--summary-dir", "", "--checkpoint-dir", os.path.join(work, "..", "ck")])
    _, status, usage = os.wait4(pid, 0)
    peak = usage.ru_maxrss * 1024
    print(f"OK mwtrain's peak resident memory: {peak / 2**20:.0f} MiB "
          f"(exit {os.waitstatus_to_exitcode(status)})")
    if peak > 2**30:
        fails.append(f"bomb: mwtrain peaked at {peak / 2**20:.0f} MiB: was it allocated?")
    return fails


def case_bad_test_image(mw, dl, work):
    """The last test image is evaluated by rank 1 alone (each rank takes a contiguous slice of
    the test set): its failure must end rank 0 too, with rank 1's message."""
    folder(work)
    bad = os.path.join(work, "test", "b", "001.png")
    write(bad, png()[:-30])
    fails = expect(train(mw, work, 1), 3, [bad, "PNG", "truncated"], "mwtrain train, 1 rank")
    return fails + expect(train(mw, work, 2), 3, ["[rank 1/2] error: " + bad, "truncated"],
                          "mwtrain train, 2 ranks")


def case_empty_class(mw, dl, work):
    folder(work)
    empty = os.path.join(work, "train", "b")
    shutil.rmtree(empty)
    write(os.path.join(empty, "notes.txt"), b"no image here\n")
    return expect(train(mw, work), 3, [empty, "holds no image file",
                                             "expected at least one"], "mwtrain train")


def case_empty_test(mw, dl, work):
    """Class folders in test/ but no image in any: the test set would be empty (Keras refuses
    such a folder: 'No images found in directory')."""
    folder(work)
    for c in "ab":
        shutil.rmtree(os.path.join(work, "test", c))
        os.makedirs(os.path.join(work, "test", c))
    return expect(train(mw, work), 3, [os.path.join(work, "test"), "no image file",
                                       "the test set would be empty"], "mwtrain train")


def case_unknown_test_class(mw, dl, work):
    folder(work)
    write(os.path.join(work, "test", "zebra", "000.png"), png())
    return expect(train(mw, work), 3, [os.path.join(work, "test"), "'zebra'",
                                             "not a class of the training set"], "mwtrain train")


def case_no_test(mw, dl, work):
    folder(work)
    shutil.rmtree(os.path.join(work, "test"))
    return expect(train(mw, work), 3, [work, "train/ and test/ (or validation/)"],
                  "mwtrain train")


def case_symlink_loop(mw, dl, work):
    """Links to a class folder's parent and to itself inside it: not followed (os.walk does not
    follow them either), so its images are counted once and nothing loops."""
    folder(work, per=5)
    os.makedirs(os.path.join(work, "train", "a", "sub"))
    write(os.path.join(work, "train", "a", "sub", "x.png"), png(seed=99))
    os.symlink("..", os.path.join(work, "train", "a", "sub", "up"))
    os.symlink(".", os.path.join(work, "train", "a", "self"))
    os.symlink("..", os.path.join(work, "train", "b", "parent"))
    fails = []
    r = run([dl, "--split", "train", "--image-size", "16x16", work])
    if r.rc != 0 or r.out.split()[:1] != ["11"]:
        fails.append(f"data_load: expected 11 training images (5 + 1 in a/, 5 in b/): {r}")
    else:
        print(f"OK data_load: 11 training images in {r.secs:.1f} s, each once")
    r = train(mw, work)
    if r.rc != 0:
        fails.append(f"mwtrain train on the folder with link loops: {r}")
    else:
        print(f"OK mwtrain train: exit 0 in {r.secs:.1f} s")
    return fails


def case_shard_label_range(mw, dl, work):
    recs = good_records(6, 3)
    recs[4] = example(png(seed=4), 7)
    shards(work, {"train": recs, "test": good_records(2, 3)})
    shard = os.path.join(work, "hostile-train.tfrecord-00001-of-00002")
    r = train(mw, work, extra=("--classes", "3"))
    return expect(r, 3, [shard, "record 1", "label 'image/class/label' is 7", "expected 0..2",
                         "--classes"], "mwtrain train --classes 3")


def case_shard_missing_feature(mw, dl, work):
    recs = good_records(6)
    recs[2] = example(png(seed=2), 0, image_key="image/other")
    shards(work, {"train": recs, "test": good_records(2)})
    shard = os.path.join(work, "hostile-train.tfrecord-00000-of-00002")
    r = train(mw, work)
    return expect(r, 3, [shard, "record 2", "image/encoded"], "mwtrain train")


def case_shard_two_values(mw, dl, work):
    """A label list of two values, an image list of two images: refused, not read as their
    first value (tf.io.parse_single_example with FixedLenFeature([]) refuses both)."""
    fails = []
    for what, key in (("label", "image/class/label"), ("image", "image/encoded")):
        recs = good_records(6)
        feats = {"image/encoded": ("bytes", [png(seed=3)] * (2 if what == "image" else 1)),
                 "image/class/label": ("int64", [1, 0] if what == "label" else [1])}
        recs[3] = tio.example(feats)
        shutil.rmtree(work, ignore_errors=True)
        shards(work, {"train": recs, "test": good_records(2)})
        shard = os.path.join(work, "hostile-train.tfrecord-00001-of-00002")  # records 3..5
        fails += expect(train(mw, work), 3, [shard, "record 0", f"feature '{key}' holds 2 values",
                                             "expected one"], f"mwtrain train, two {what}s")
    return fails


def case_shard_no_test(mw, dl, work):
    shards(work, {"train": good_records(6)})
    return expect(train(mw, work), 3, [work, "no test or validation shards"], "mwtrain train")


def case_shard_plain_names(mw, dl, work):
    """*.tfrecord files, not named by split: each split would be all of them."""
    os.makedirs(work)
    for name, n in (("a.tfrecord", 4), ("b.tfrecord", 3)):
        write(os.path.join(work, name), b"".join(tio.record(r) for r in good_records(n)))
    return expect(train(mw, work), 3, [work, "not named by split",
                                       "would make the test set the training set"],
                  "mwtrain train")


def case_hidden_folder(mw, dl, work):
    """A folder whose name starts with '.' beside the class folders is no class (Keras skips
    it): two classes, labels 0 and 1, the hidden folder's images not read."""
    folder(work, per=3)
    for split in ("train", "test"):
        write(os.path.join(work, split, ".ipynb_checkpoints", "x.png"), png(seed=7))
    fails = []
    for split, n in (("train", 6), ("test", 4)):
        out = os.path.join(work + "-out", split)
        os.makedirs(os.path.dirname(out), exist_ok=True)
        r = run([dl, "--split", split, "--image-size", "16x16", "--out", out, work])
        with open(out + ".labels", "rb") as f:
            labels = list(struct.unpack("<%di" % n, f.read())) if r.rc == 0 else None
        want = [0] * (n // 2) + [1] * (n // 2)
        if r.rc != 0 or r.out.split()[:5] != [str(n), "16", "16", "3", "2"] or labels != want:
            fails.append(f"{split}: expected {n} images of 2 classes, labels {want}; got "
                         f"labels {labels}, {r}")
        else:
            print(f"OK data_load {split}: {r.out.split()[0]} images of 2 classes, labels {labels}")
    return fails


def case_shard_gzip(mw, dl, work):
    """GZIP shards (as tf.data writes them with compression_type="GZIP") train through their
    plain copies, written once beside them (.mwtrain-cache/) and reused: data_load gives the
    plain shards' batches bit for bit, the first time and the second; a --shard-cache that
    cannot be made is one error naming it (exit 4); a truncated GZIP shard names the shard."""
    recs = {"train": good_records(6), "test": good_records(2)}
    plain, gz = os.path.join(work, "plain"), os.path.join(work, "gz")
    shards(plain, recs)
    shards(gz, recs, compress=True)
    fails = []
    ref = run([dl, "--image-size", "8x8", "--out", os.path.join(work, "ref"), plain])
    for attempt in ("writes the copies", "reuses them"):
        r = run([dl, "--image-size", "8x8", "--out", os.path.join(work, "got"), gz])
        same = ref.rc == 0 and r.rc == 0 and all(
            open(os.path.join(work, "ref" + ext), "rb").read() ==
            open(os.path.join(work, "got" + ext), "rb").read() for ext in (".f32", ".labels"))
        copies = [c for c in os.listdir(os.path.join(gz, ".mwtrain-cache"))
                  if c.endswith(".tfrecord")]
        ok = same and len(copies) == 4
        print(f"{'OK' if ok else 'FAIL'} GZIP shards ({attempt}): {len(copies)} plain copies, "
              f"batches {'equal to' if same else 'NOT equal to'} the plain shards'")
        if not ok:
            fails.append(f"GZIP shards ({attempt}): {r} / {ref}")
    r = train(mw, gz)
    fails += [] if r.rc == 0 else [f"training on GZIP shards: {r}"]
    blocker = os.path.join(work, "a-file")
    write(blocker, b"x")
    r = train(mw, gz, extra=("--shard-cache", os.path.join(blocker, "cache")))
    fails += expect(r, 4, [blocker, "--shard-cache"], "mwtrain train, an impossible --shard-cache")
    shard = os.path.join(gz, "hostile-train.tfrecord-00001-of-00002")
    with open(shard, "rb") as f:
        data = f.read()
    write(shard, data[:len(data) // 2])
    r = train(mw, gz, extra=("--shard-cache", os.path.join(work, "fresh")))
    return fails + expect(r, 3, [shard, "GZIP stream truncated"], "mwtrain train, truncated GZIP")


def case_shard_index(mw, dl, work):
    """A shard's record offsets and labels are kept (.mwtrain-cache/*.mwex) and the next start
    reads them instead of the shard: a shard whose record data is then damaged in place (size
    and mtime restored) opens fine and fails only when a batch reads that record; a shard that
    changes size is read again; a damaged index is read around. Every run gives the batches of
    the first."""
    shards(work, {"train": good_records(6), "test": good_records(2)})
    cache = os.path.join(work, ".mwtrain-cache")
    fails = []
    out = lambda tag: [dl, "--image-size", "8x8", "--out", os.path.join(work, tag), work]
    same = lambda tag: all(open(os.path.join(work, "ref" + e), "rb").read() ==
                           open(os.path.join(work, tag + e), "rb").read()
                           for e in (".f32", ".labels"))
    ref = run(out("ref"))
    idx = sorted(f for f in os.listdir(cache) if f.endswith(".mwex")) if ref.rc == 0 else []
    if ref.rc != 0 or len(idx) != 4:
        return [f"first read: {ref}; {len(idx)} indexes kept, expected 4"]
    print(f"OK the first read keeps {len(idx)} indexes")
    r = run(out("again"))
    fails += [] if r.rc == 0 and same("again") else [f"the read from the indexes: {r}"]
    ix = os.path.join(cache, idx[0])
    with open(ix, "r+b") as f:  # damaged: ignored, the shard read, the index written again
        f.seek(30)
        b = f.read(1)
        f.seek(30)
        f.write(bytes([b[0] ^ 0x40]))
    r = run(out("damaged"))
    fails += [] if r.rc == 0 and same("damaged") else [f"a damaged index: {r}"]
    shard = os.path.join(work, "hostile-test.tfrecord-00000-of-00002")
    st = os.stat(shard)
    with open(shard, "r+b") as f:  # the first record's data, same size, mtime put back
        f.seek(20)
        b = f.read(1)
        f.seek(20)
        f.write(bytes([b[0] ^ 0xFF]))
    os.utime(shard, ns=(st.st_atime_ns, st.st_mtime_ns))
    r = run([dl, "--image-size", "8x8", "--split", "test", work])
    fails += expect(r, 3, [shard, "the record at byte offset 0", "data CRC mismatch"],
                    "data_load after damage the index cannot see (met when the batch reads it)")
    with open(shard, "ab") as f:  # grown: its index no longer names it, the shard is read
        f.write(b"\0")
    r = run([dl, "--image-size", "8x8", "--split", "test", work])
    fails += expect(r, 3, [shard, "record 0", "data CRC mismatch"],
                    "data_load after the shard changed size (read again at the start)")
    print("OK the indexes were read, a damaged one read around")
    return fails


def case_shard_corrupt_image(mw, dl, work):
    recs = good_records(8)
    recs[5] = example(png(seed=5)[:70], 1)
    shards(work, {"train": recs, "test": good_records(2)})
    shard = os.path.join(work, "hostile-train.tfrecord-00001-of-00002")
    return in_training(mw, work, 3, [shard, "the record at byte offset", "PNG",
                                           "truncated"])


CASES = {name[5:].replace("_", "-"): f for name, f in globals().items()
         if name.startswith("case_")}


def main(argv):
    if len(argv) != 4 or argv[1] not in CASES:
        print(f"usage: folder_hostile.py CASE MWTRAIN DATA_LOAD; CASE one of {sorted(CASES)}")
        return 2
    work = tempfile.mkdtemp(prefix="mwtest-hostile-")
    try:
        fails = CASES[argv[1]](argv[2], argv[3], os.path.join(work, "data"))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for f in fails:
        print("FAIL", f)
    print(f"folder-hostile {argv[1]}: {len(fails)} failures")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
