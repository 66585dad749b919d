"""Decoding throughput: JPEG files decoded and resized to 224x224 RGB float32, mwtrain's data
pipeline (tests/images/data_load) against tf.data and a PyTorch DataLoader, on the same files
and the same number of cores. tests/bench/decode_throughput.sh runs it; the subcommands:

  make OUT N [--test M] [--seed S]     (TensorFlow's Python) N training JPEG files of 200 to
        300 pixels a side (each side drawn on its own, so every image is resized), natural-image
        like (smooth color fields, overlapping soft-edged shapes, mid-frequency texture and
        sensor noise), quality 90 with 4:2:0 chroma (tf.io.encode_jpeg's default, as most
        photographs are), in OUT/folder/{train,test}/cK/NNNNN.jpg (10 classes), and the same
        bytes as OUT/shards/synth-{train,test}.tfrecord-0000I-of-00008 (TFDS's names) of
        tf.train.Example with image/encoded and image/class/label; prints the mean file size
  tf-folder DIR THREADS   keras.utils.image_dataset_from_directory(DIR, image_size=(224, 224),
        batch_size=64, shuffle=False) + prefetch(AUTOTUNE), iterated once
  tf-records GLOB THREADS TFRecordDataset -> map(parse + decode_jpeg + resize,
        num_parallel_calls=AUTOTUNE) -> batch(64) -> prefetch(AUTOTUNE), iterated once
  torch-io DIR THREADS    torch DataLoader(num_workers=THREADS, batch_size=64) over a Dataset
        of torchvision.io.decode_jpeg + F.interpolate(bilinear, half-pixel, no antialiasing:
        tf.image.resize's sampling) to float32
  torch-pil DIR THREADS   the same with PIL: Image.open().convert("RGB").resize((224, 224),
        BILINEAR) (Pillow's bilinear widens its filter when shrinking: antialiased), to float32
  run --data-load BIN --tf-python PY [--torch-python PY] --data OUT [--rounds 3]
        [--threads 1,all]   every program with 1 and all cores, rounds alternating programs,
        each pinned by taskset to its cores and told its thread count; prints the table of
        medians (images/s and images/s per core) and mwtrain's ratio to the fastest peer

TensorFlow is limited to THREADS by tf.config.threading (intra- and inter-op) and the
dataset's private thread pool (options.threading.private_threadpool_size); PyTorch's workers
run one intra-op thread each (DataLoader's default). A peer prints "images=N seconds=S
images_per_sec=R cpu_seconds=C", its time from creating the iterator to the last batch (what
mwtrain's data_load times: assembling every batch, not listing the files) and the CPU time of
its threads and workers over it. Besides images/s and images/s per core, the table gives
images per CPU-second: on a machine other programs load, a run's wall time counts the time
slices they take, its CPU time much less so."""
import glob
import os
import resource
import statistics
import subprocess
import sys
import time

SIZE = 224
BATCH = 64


def synth(rng, np, h, w):
    """One natural-image-like picture: h x w x 3 uint8."""
    def field(cells, amp, hh=h, ww=w):  # a smooth random field: a coarse grid upsampled
        g = rng.normal(0, amp, (cells + 1, cells + 1, 3)).astype(np.float32)
        ys, xs = np.linspace(0, cells, hh), np.linspace(0, cells, ww)
        y0, x0 = np.minimum(ys.astype(int), cells - 1), np.minimum(xs.astype(int), cells - 1)
        fy = (ys - y0).astype(np.float32)[:, None, None]
        fx = (xs - x0).astype(np.float32)[None, :, None]
        top = g[y0][:, x0] * (1 - fx) + g[y0][:, x0 + 1] * fx
        bot = g[y0 + 1][:, x0] * (1 - fx) + g[y0 + 1][:, x0 + 1] * fx
        return top * (1 - fy) + bot * fy
    img = rng.uniform(40, 200, 3).astype(np.float32) + field(3, 45)
    for _ in range(rng.integers(3, 9)):  # soft-edged ellipses and boxes of their own color
        cy, cx = rng.uniform(0, h), rng.uniform(0, w)
        ry, rx = rng.uniform(10, h / 2.5), rng.uniform(10, w / 2.5)
        y0, y1 = max(int(cy - ry), 0), min(int(cy + ry) + 1, h)
        x0, x1 = max(int(cx - rx), 0), min(int(cx + rx) + 1, w)
        if y1 <= y0 or x1 <= x0:
            continue
        yy = ((np.arange(y0, y1, dtype=np.float32) - cy) / ry)[:, None]
        xx = ((np.arange(x0, x1, dtype=np.float32) - cx) / rx)[None, :]
        d = yy ** 2 + xx ** 2 if rng.random() < 0.5 else np.maximum(yy ** 2, xx ** 2)
        a = np.clip((1.0 - d) * rng.uniform(3, 12), 0, 1)[:, :, None]
        shade = rng.uniform(0, 255, 3).astype(np.float32) + field(2, 20, y1 - y0, x1 - x0)
        img[y0:y1, x0:x1] = img[y0:y1, x0:x1] * (1 - a) + shade * a
    img += field(24, 12) + field(70, 8)  # texture
    img += rng.standard_normal((h, w, 3), dtype=np.float32) * 6  # sensor noise
    return np.clip(img, 0, 255).astype(np.uint8)


def make(out, n, ntest, seed):
    import numpy as np
    import tensorflow as tf
    rng = np.random.default_rng(seed)
    total = 0
    for split, count in (("train", n), ("test", ntest)):
        records = []
        for i in range(count):
            label = i * 10 // count  # class folders of consecutive indices: the listing's order
            img = synth(rng, np, int(rng.integers(200, 301)), int(rng.integers(200, 301)))
            jpg = tf.io.encode_jpeg(img, quality=90).numpy()
            d = os.path.join(out, "folder", split, "c%d" % label)
            os.makedirs(d, exist_ok=True)
            with open(os.path.join(d, "%05d.jpg" % i), "wb") as f:
                f.write(jpg)
            records.append((jpg, label))
            total += len(jpg) if split == "train" else 0
        os.makedirs(os.path.join(out, "shards"), exist_ok=True)
        per = (count + 7) // 8
        for s in range(8):
            path = os.path.join(out, "shards", "synth-%s.tfrecord-%05d-of-00008" % (split, s))
            with tf.io.TFRecordWriter(path) as w:
                for jpg, label in records[s * per:(s + 1) * per]:
                    w.write(tf.train.Example(features=tf.train.Features(feature={
                        "image/encoded": tf.train.Feature(bytes_list=tf.train.BytesList(
                            value=[jpg])),
                        "image/class/label": tf.train.Feature(int64_list=tf.train.Int64List(
                            value=[label])),
                    })).SerializeToString())
    print("made %d + %d JPEG files, %.1f KB each on average" % (n, ntest, total / n / 1024))


def cpu_now():
    """CPU seconds of this process's threads and of its children that have been waited for
    (a DataLoader's workers, joined when the iterator is exhausted)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def report(n, t0, c0):
    dt, cpu = time.perf_counter() - t0, cpu_now() - c0
    print("images=%d seconds=%.4f images_per_sec=%.2f cpu_seconds=%.4f" % (n, dt, n / dt, cpu))


def tf_setup(threads):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(threads)
    opts = tf.data.Options()
    opts.threading.private_threadpool_size = threads
    opts.autotune.cpu_budget = threads
    return tf, opts


def tf_iterate(ds, tf, opts):
    ds = ds.with_options(opts)
    n = 0
    t0, c0 = time.perf_counter(), cpu_now()
    for x, _ in ds:
        assert tuple(x.shape[1:]) == (SIZE, SIZE, 3) and x.dtype == tf.float32
        n += int(x.shape[0])
    report(n, t0, c0)


def tf_folder(path, threads):
    tf, opts = tf_setup(threads)
    import keras
    ds = keras.utils.image_dataset_from_directory(path, image_size=(SIZE, SIZE), batch_size=BATCH,
                                                  shuffle=False, verbose=False)
    tf_iterate(ds.prefetch(tf.data.AUTOTUNE), tf, opts)


def tf_records(pattern, threads):
    tf, opts = tf_setup(threads)
    spec = {"image/encoded": tf.io.FixedLenFeature([], tf.string),
            "image/class/label": tf.io.FixedLenFeature([], tf.int64)}

    def parse(rec):
        e = tf.io.parse_single_example(rec, spec)
        img = tf.io.decode_jpeg(e["image/encoded"], channels=3)
        return tf.image.resize(img, (SIZE, SIZE)), e["image/class/label"]
    files = sorted(glob.glob(pattern))
    ds = tf.data.TFRecordDataset(files).map(parse, num_parallel_calls=tf.data.AUTOTUNE)
    tf_iterate(ds.batch(BATCH).prefetch(tf.data.AUTOTUNE), tf, opts)


def listing(path):
    """The training files in the folder's order (classes sorted, then file names), labels."""
    classes = sorted(os.listdir(path))
    return [(os.path.join(path, c, f), k) for k, c in enumerate(classes)
            for f in sorted(os.listdir(os.path.join(path, c)))]


def torch_run(path, threads, kind):
    import torch
    import torch.nn.functional as F
    files = listing(path)
    if kind == "io":
        import torchvision.io as tio

        def load(p):
            img = tio.decode_jpeg(tio.read_file(p), mode=tio.ImageReadMode.RGB)
            return F.interpolate(img[None].float(), size=(SIZE, SIZE), mode="bilinear",
                                 align_corners=False, antialias=False)[0]
    else:
        import numpy as np
        from PIL import Image

        def load(p):
            with Image.open(p) as im:
                a = np.asarray(im.convert("RGB").resize((SIZE, SIZE), Image.BILINEAR))
            return torch.from_numpy(a).permute(2, 0, 1).float()

    class Files(torch.utils.data.Dataset):
        def __len__(self):
            return len(files)

        def __getitem__(self, i):
            return load(files[i][0]), files[i][1]
    torch.set_num_threads(threads)
    dl = torch.utils.data.DataLoader(Files(), batch_size=BATCH, num_workers=threads,
                                     shuffle=False)
    n = 0
    t0, c0 = time.perf_counter(), cpu_now()
    for x, _ in dl:
        assert tuple(x.shape[1:]) == (3, SIZE, SIZE) and x.dtype == torch.float32
        n += int(x.shape[0])
    report(n, t0, c0)


def warm(data):
    """Every file read once: the page cache holds them for every program alike."""
    nbytes = 0
    for root, _, names in os.walk(data):
        for f in names:
            with open(os.path.join(root, f), "rb") as fh:
                nbytes += len(fh.read())
    return nbytes


def value(out, key):
    for tok in out.split():
        if tok.startswith(key + "="):
            return float(tok.split("=", 1)[1])
    return None


def programs(a):
    me = os.path.abspath(__file__)
    folder = os.path.join(a.data, "folder")
    shards = os.path.join(a.data, "shards")
    size = "%dx%d" % (SIZE, SIZE)

    def mw(path):
        return lambda t: [a.data_load, "--threads", str(t), "--image-size", size, path]
    progs = [("mwtrain folder", mw(folder), "mw"),
             ("mwtrain shards", mw(shards), "mw"),
             ("tf image_dataset_from_directory",
              lambda t: [a.tf_python, me, "tf-folder", os.path.join(folder, "train"), str(t)],
              "peer"),
             ("tf TFRecordDataset",
              lambda t: [a.tf_python, me, "tf-records",
                         os.path.join(shards, "synth-train.tfrecord-*"), str(t)], "peer")]
    for kind, what in (("io", "torchvision.io"), ("pil", "PIL")):  # None: no PyTorch venv
        progs.append(("torch DataLoader " + what,
                      lambda t, k=kind: a.torch_python and [
                          a.torch_python, me, "torch-" + k, os.path.join(folder, "train"),
                          str(t)], "peer"))
    return progs


def measure(cmd, cpus, threads, env):
    """(images/s, images per CPU-second) of one run pinned to cpus, or (None, why). mwtrain's
    CPU time is its whole process's (the file listing or the shard index included), waited for
    here; a peer's is its own over the timed iteration (its interpreter's start excluded)."""
    if not cmd:
        return None, "skipped: no PyTorch (tests/bench/torchvision_venv.sh failed)"
    full = ["taskset", "-c", ",".join(map(str, cpus))] + cmd
    env = dict(env, OMP_NUM_THREADS=str(threads))
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.run(full, capture_output=True, text=True, env=env)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        last = [ln for ln in p.stderr.splitlines() if ln.strip()][-1:] or ["no message"]
        return None, "failed (exit %d): %s" % (p.returncode, last[0])
    if os.path.basename(cmd[0]) == "data_load":  # count H W C classes seconds images/s
        f = p.stdout.split()
        cpu = r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime
        return (float(f[6]), int(f[0]) / cpu), None
    v, n, cpu = (value(p.stdout, k) for k in ("images_per_sec", "images", "cpu_seconds"))
    if not v or not cpu:
        return None, "no images_per_sec in: " + p.stdout.strip()[-200:]
    return (v, n / cpu), None


def run(a):
    cpus = sorted(os.sched_getaffinity(0))
    counts = sorted({len(cpus) if t == "all" else int(t) for t in a.threads.split(",")})
    counts = [t for t in counts if 0 < t <= len(cpus)]
    print("load average %s on %d CPUs: wall-clock images/s mean something only on an otherwise "
          "idle machine; images per CPU-second less affected by other load" % (
              " ".join(open("/proc/loadavg").read().split()[:3]), len(cpus)))
    print("page cache warmed: %.1f MB read" % (warm(a.data) / 1e6))
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    progs = programs(a)
    vals, notes = {}, {}
    for r in range(a.rounds):
        for t in counts:
            for name, cmd, _ in progs:
                if (name, t) in notes:
                    continue
                v, why = measure(cmd(t), cpus[:t], t, env)
                if v is None:
                    notes[(name, t)] = why
                else:
                    vals.setdefault((name, t), []).append(v)
                print("round %d, %d core%s, %-34s %s" % (
                    r + 1, t, "s" if t > 1 else " ", name,
                    "%7.1f images/s, %7.1f per CPU-second" % v if v else why), flush=True)
    table(progs, counts, vals, notes, a.rounds)


def table(progs, counts, vals, notes, rounds):
    print("\nDecoded and resized to %dx%d RGB float32, batches of %d; medians of %d rounds"
          % (SIZE, SIZE, BATCH, rounds))
    print("%-34s %5s %10s %15s %15s" % ("program", "cores", "images/s", "images/s/core",
                                        "images/CPU-s"))
    med = {}
    for t in counts:
        for name, _, _ in progs:
            if (name, t) not in vals:
                print("%-34s %5d %s" % (name, t, notes.get((name, t), "no result")))
                continue
            w = statistics.median(v[0] for v in vals[(name, t)])
            c = statistics.median(v[1] for v in vals[(name, t)])
            med[(name, t)] = (w, c)
            print("%-34s %5d %10.1f %15.1f %15.1f" % (name, t, w, w / t, c))
    print()
    for t in counts:
        for i, what in ((0, "images/s"), (1, "images per CPU-second")):
            peers = [(med[(n, t)][i], n) for n, _, k in progs if k == "peer" and (n, t) in med]
            if not peers:
                continue
            best, who = max(peers)
            for name, _, k in progs:
                if k == "mw" and (name, t) in med:
                    print("%d core%s, %s: %s / fastest peer (%s) = %.2f" % (
                        t, "s" if t > 1 else "", what, name, who, med[(name, t)][i] / best))


def main():
    import argparse
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make")
    m.add_argument("out")
    m.add_argument("n", type=int)
    m.add_argument("--test", type=int, default=100)
    m.add_argument("--seed", type=int, default=1)
    for name in ("tf-folder", "tf-records", "torch-io", "torch-pil"):
        s = sub.add_parser(name)
        s.add_argument("path")
        s.add_argument("threads", type=int)
    r = sub.add_parser("run")
    r.add_argument("--data-load", required=True)
    r.add_argument("--tf-python", required=True)
    r.add_argument("--torch-python")
    r.add_argument("--data", required=True)
    r.add_argument("--rounds", type=int, default=3)
    r.add_argument("--threads", default="1,all")
    a = p.parse_args()
    if a.cmd == "make":
        make(a.out, a.n, a.test, a.seed)
    elif a.cmd == "tf-folder":
        tf_folder(a.path, a.threads)
    elif a.cmd == "tf-records":
        tf_records(a.path, a.threads)
    elif a.cmd in ("torch-io", "torch-pil"):
        torch_run(a.path, a.threads, a.cmd[6:])
    else:
        a.data_load = os.path.abspath(a.data_load)
        run(a)


if __name__ == "__main__":
    sys.exit(main())
