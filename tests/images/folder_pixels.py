"""An image folder read by mwtrain (tests/images/data_load, which opens --data as mwtrain does)
against Keras 3.15's keras.utils.image_dataset_from_directory(shuffle=False) on TensorFlow,
example by example, and the same files as TFRecord shards against the folder.

The folder: train/{a,b,c}/ and test/{a,b,c}/ of JPEG (baseline, progressive, 4:4:4, gray),
PNG (gray, gray+alpha, RGB, RGBA, 16-bit, 8-bit palette with and without tRNS), BMP and GIF
files of mixed sizes (17x23, 64x48, 100x100, 31x200, ... and some already of the model's
32x40), in nested subfolders (sub/, sub/deeper/, sub-x/: '-' sorts before '/'), with names
that sort by code point (upper case first, an upper-case .PNG), a link to a file (read), a
link to a folder and a link to the class folder's parent, a loop (neither followed, as
os.walk does not), files that are not images by name (notes.txt, README, a LICENSE.txt
beside the class folders), an image beside the class folders (no class's), a hidden folder
train/.cache/ (not a class: Keras skips class folders whose name starts with '.') and, inside
a class, a hidden subfolder and a hidden file (read: only class folders are skipped so). Three folders are made of it: every format (rgb), no
GIF and no BMP (TensorFlow refuses both as grayscale) and PNG and BMP only (rgba: TensorFlow
refuses JPEG and GIF as rgba).

For each color mode, bilinear and nearest, crop_to_aspect_ratio off and on, at 32x40, and
once at the default size (data_load without --image-size takes the first training image's;
Keras is given that size), both splits:
  - the same number of examples, the same labels in the same order;
  - an image already of the requested size, PNG, BMP or GIF: bitwise equal to Keras' pixel
    / 255 in float32 (both sides decode with the same libraries' rules and divide the same
    uint8 by 255.0f; nothing is rounded differently);
  - anything else (a JPEG, a resized image) within 1/255 (one level of 255): the JPEG IDCT is
    the same integer-fast libjpeg-turbo algorithm on both sides, but TensorFlow carries its
    own build of libjpeg-turbo and mwtrain uses the system's, whose SIMD and C paths and
    versions may round a decoded value by one level differently; bilinear resizing is a convex
    combination of decoded values, so a difference of one level in its inputs stays within
    one level in its output, and the float32 lerps (values below 256, a few operations) add
    rounding of order 256 * 2^-24, far below that. The largest difference per case and
    format is printed (measured: 0 everywhere on the machine this was written on).
A sweep adds 24 noise images of random sizes (1 to 399 a side) in class folders named
"Zebra", "a b" and "éclair", resized to 4 random sizes (1 to 259), bilinear and nearest, crop
off and on, held to the same rules.
Then the same files' bytes as TFRecord shards of tf.train.Example (image/encoded,
image/class/label; 3 training shards, 2 test shards, written by tf.io.TFRecordWriter in
Keras' order; a decoy image/format feature beside them): data_load on the shards gives the
folder's output bit for bit, in every case, and so do data_load on the folder with a decoding
pool (--decode-threads 2) and, for every format, shards whose features have other names
(jpeg_bytes, class_id) given by --image-key and --label-key.

Controls, each of which must be reported as a difference: Keras' arrays shifted by one
example (a wrong order), one value of an exact-size PNG off by one level, and shards with two
records swapped.

    folder_pixels.py DATA_LOAD WORK_DIR   (run with TensorFlow's Python)
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_images as ci  # noqa: E402  (its writers; it sets TensorFlow's environment)
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

SIZE = (32, 40)  # the model's input (height, width)
TOL = 1.0 / 255  # one level of 255, on the /255 scale the model sees
SLACK = 1e-6  # float32 rounding of the /255 scale's values (below 1, ulp 2^-24)
MODES = {"rgb": 3, "grayscale": 1, "rgba": 4}


def files():
    """rel path -> bytes (or ("link", target) for a symbolic link)."""
    enc = lambda a, **k: tf.io.encode_jpeg(a, **k).numpy()  # noqa: E731
    png = lambda a: tf.io.encode_png(a).numpy()  # noqa: E731
    pal = ci.RNG.integers(0, 256, 256 * 3).tolist()
    pal_png = lambda h, w, **k: ci.png_raw(  # noqa: E731
        w, h, 8, 3, [bytes(r.astype(np.uint8)) for r in ci.RNG.integers(0, 256, (h, w))], pal,
        **k)
    return {
        "train/LICENSE.txt": b"not a class\n",
        "train/stray.png": png(ci.photo(32, 40, 3)),
        "train/a/.thumbs/p_hidden_sub.png": png(ci.photo(23, 17, 3)),
        "train/c/.p_hidden_file.png": png(ci.photo(40, 32, 3)),
        "train/.cache/p_hidden.png": png(ci.photo(32, 40, 3)),
        "train/a/j_rgb.jpg": enc(ci.photo(17, 23, 3), quality=90),
        "train/a/J_gray.jpg": enc(ci.photo(64, 48, 1), quality=75),
        "train/a/p_rgb_exact.png": png(ci.photo(32, 40, 3)),
        "train/a/notes.txt": b"not an image\n",
        "train/a/sub/p_gray.png": png(ci.photo(100, 100, 1)),
        "train/a/sub/deeper/p_ga.png": png(ci.photo(31, 200, 2)),
        "train/a/sub/up": ("link", ".."),
        "train/a/sub-x/Z.PNG": png(ci.photo(20, 30, 3)),
        "train/a/sub-x/p_link.png": ("link", "../../b/p_rgba.png"),
        "train/a/to_b": ("link", "../b"),
        "train/b/j_prog.jpg": enc(ci.photo(100, 100, 3), progressive=True),
        "train/b/p_pal.png": pal_png(31, 200),
        "train/b/p_rgba.png": png(ci.photo(64, 48, 4)),
        "train/b/p_pal_trns_exact.png": pal_png(32, 40, trns=list(range(0, 256, 3))),
        "train/b/p_gray_exact.png": png(ci.photo(32, 40, 1)),
        "train/b/p_rgb16.png": png(ci.photo(23, 17, 3).astype(np.uint16) * 257),
        "train/b/m_rgb.bmp": ci.bmp(ci.photo(17, 23, 3)),
        "train/b/g.gif": ci.gif(23, 17, pal, ci.RNG.integers(0, 256, (17, 23))),
        "train/b/B_upper.png": png(ci.photo(48, 64, 3)),
        "train/c/j_444.jpg": enc(ci.photo(64, 48, 3), quality=95, chroma_downsampling=False),
        "train/c/j_exact.jpg": enc(ci.photo(32, 40, 3), quality=85),
        "train/c/p_rgba_exact.png": png(ci.photo(32, 40, 4)),
        "train/c/m_exact.bmp": ci.bmp(ci.photo(32, 40, 4), top_down=True),
        "train/c/g_exact.gif": ci.gif(40, 32, pal, ci.RNG.integers(0, 256, (32, 40))),
        "train/c/README": b"no extension\n",
        "test/a/j.jpg": enc(ci.photo(100, 100, 3)),
        "test/a/p_exact.png": png(ci.photo(32, 40, 3)),
        "test/a/m.bmp": ci.bmp(ci.photo(31, 200, 3)),
        "test/b/p_pal.png": pal_png(17, 23),
        "test/b/sub/j.jpg": enc(ci.photo(31, 200, 3)),
        "test/b/sub/g.gif": ci.gif(64, 48, pal, ci.RNG.integers(0, 256, (48, 64))),
        "test/c/p_gray.png": png(ci.photo(64, 48, 1)),
        "test/c/p_ga_exact.png": png(ci.photo(32, 40, 2)),
        "test/c/notes.txt": b"not an image\n",
    }


def keep(rel, variant):
    """Whether variant's folder holds rel (links and non-images stay in all)."""
    ext = os.path.splitext(rel)[1].lower()
    if variant == "nogifbmp":
        return ext not in (".gif", ".bmp")
    if variant == "pngbmp":
        return ext not in (".jpg", ".jpeg", ".gif")
    return True


def make_folders(work):
    """The three folders; returns {variant: root}."""
    all_files, roots = files(), {}
    for variant in ("full", "nogifbmp", "pngbmp"):
        root = roots[variant] = os.path.join(work, variant)
        for rel, data in all_files.items():
            if not keep(rel, variant):
                continue
            path = os.path.join(root, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            if isinstance(data, tuple):
                os.symlink(data[1], path)
            else:
                with open(path, "wb") as f:
                    f.write(data)
    return roots


def keras_split(root, split, mode, size, nearest, crop):
    """image_dataset_from_directory's (x / 255 as float32, labels, paths)."""
    import keras
    ds = keras.utils.image_dataset_from_directory(
        os.path.join(root, split), shuffle=False, image_size=size, color_mode=mode,
        interpolation="nearest" if nearest else "bilinear", crop_to_aspect_ratio=crop,
        batch_size=8, verbose=False)
    x = np.concatenate([b[0].numpy() for b in ds]).astype(np.float32)
    y = np.concatenate([b[1].numpy() for b in ds]).astype(np.int32)
    return x / np.float32(255), y, list(ds.file_paths)


def data_load(tool, path, out, split, mode, size, nearest, crop, extra=()):
    """data_load's (x, labels, (H, W, C)); raises with its stderr when it fails."""
    args = [tool, "--color-mode", mode, "--split", split, "--out", out, *extra]
    args += ["--image-size", "%dx%d" % size] if size else []
    args += ["--nearest"] if nearest else []
    args += ["--crop"] if crop else []
    r = subprocess.run(args + [path], capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise RuntimeError(f"data_load {' '.join(args[1:])} {path}: exit {r.returncode}: "
                           f"{r.stderr.strip()}")
    count, h, w, c = (int(v) for v in r.stdout.split()[:4])
    x = np.fromfile(out + ".f32", np.float32).reshape(count, h, w, c)
    return x, np.fromfile(out + ".labels", np.int32), (h, w, c)


def native_size(path):
    img = tf.io.decode_image(tf.io.read_file(path), expand_animations=False)
    return tuple(img.shape[:2])


def fmt(path):
    ext = os.path.splitext(path)[1].lower()
    return {".jpg": "JPEG", ".png": "PNG", ".bmp": "BMP", ".gif": "GIF"}[ext]


def compare(tag, got, want, paths, size, worst):
    """Example-by-example differences; returns the failures, worst[(fmt, kind)] updated."""
    (gx, gy), (kx, ky) = got, want
    if gx.shape != kx.shape or not np.array_equal(gy, ky):
        return [f"{tag}: data_load {gx.shape} labels {gy.tolist()}, Keras {kx.shape} labels "
                f"{ky.tolist()}"]
    fails = []
    for i, path in enumerate(paths):
        kind = "native" if native_size(path) == tuple(size) else "resized"
        exact = kind == "native" and fmt(path) != "JPEG"
        d = float(np.max(np.abs(gx[i] - kx[i])))
        key = (fmt(path), kind)
        worst[key] = max(worst.get(key, 0.0), d)
        if exact and not np.array_equal(gx[i].view(np.uint32), kx[i].view(np.uint32)):
            fails.append(f"{tag}: {path}: not bitwise equal (max |difference| {d * 255:g}/255)")
        elif d > TOL + SLACK:
            fails.append(f"{tag}: {path}: max |difference| {d * 255:g}/255 > 1/255")
    return fails


def write_shards(folder_root, shard_dir, paths_by_split, swap=False,
                 keys=("image/encoded", "image/class/label")):
    """The files of each split as shards (features keys: image, label) in Keras' order; swap:
    the first two training records exchanged (the control)."""
    os.makedirs(shard_dir, exist_ok=True)
    for split, (paths, labels) in paths_by_split.items():
        recs = list(zip(paths, labels))
        if swap and split == "train":
            recs[0], recs[1] = recs[1], recs[0]
        n = 3 if split == "train" else 2
        per = (len(recs) + n - 1) // n
        for s in range(n):
            name = os.path.join(shard_dir, "pix-%s.tfrecord-%05d-of-%05d" % (split, s, n))
            with tf.io.TFRecordWriter(name) as w:
                for path, label in recs[s * per:(s + 1) * per]:
                    with open(path, "rb") as f:
                        data = f.read()
                    w.write(tf.train.Example(features=tf.train.Features(feature={
                        keys[0]: tf.train.Feature(bytes_list=tf.train.BytesList(value=[data])),
                        keys[1]: tf.train.Feature(
                            int64_list=tf.train.Int64List(value=[int(label)])),
                        "image/format": tf.train.Feature(
                            bytes_list=tf.train.BytesList(value=[b"decoy"])),
                    })).SerializeToString())


CASES = [(variant, mode, size, nearest, crop)
         for variant, mode in (("full", "rgb"), ("nogifbmp", "grayscale"), ("pngbmp", "rgba"))
         for size in (SIZE,) for nearest in (False, True) for crop in (False, True)]
CASES.append(("full", "rgb", None, False, False))  # the first training image's size


def run_case(tool, roots, alts, work, case, worst, keep_for_controls):
    variant, mode, size, nearest, crop = case
    fails = []
    for split in ("train", "test"):
        tag = (f"{variant} {mode} {split} {'%dx%d' % size if size else 'default size'} "
               f"{'nearest' if nearest else 'bilinear'}{' crop' if crop else ''}")
        out = os.path.join(work, "out")
        gx, gy, shape = data_load(tool, roots[variant], out, split, mode, size, nearest, crop)
        if size is None:  # Keras has no such default: give it the size data_load took
            first = keras_split(roots[variant], "train", mode, (8, 8), nearest, crop)[2][0]
            if shape[:2] != native_size(first):
                fails.append(f"{tag}: default size {shape[:2]}, the first training image "
                             f"{first} is {native_size(first)}")
        csize = size or shape[:2]
        kx, ky, paths = keras_split(roots[variant], split, mode, csize, nearest, crop)
        fails += compare(tag, (gx, gy), (kx, ky), paths, csize, worst.setdefault(tag, {}))
        for what, path, extra in alts[variant]:
            sx, sy, _ = data_load(tool, path, out + "s", split, mode, size, nearest, crop, extra)
            if not (np.array_equal(gx.view(np.uint32), sx.view(np.uint32)) and
                    np.array_equal(gy, sy)):
                fails.append(f"{tag}: {what} differ(s) from the folder read without a pool")
        if split == "train":
            keep_for_controls.setdefault(case, (gx, gy, kx, ky, paths, csize))
    return fails


def sweep(tool, work):
    """Random sizes (1..399 a side, noise: JPEG's worst case) to random targets (1..259),
    bilinear and nearest, crop off and on: the resize's index and weight arithmetic at many
    scales, against Keras; the classes' names (upper case, a space, UTF-8) sort by code
    point."""
    rng = np.random.default_rng(11)
    root = os.path.join(work, "sweep")
    for split, n in (("train", 8), ("test", 1)):
        for c in ("éclair", "a b", "Zebra"):  # code points: Zebra, a b, éclair
            os.makedirs(os.path.join(root, split, c))
            for i in range(n):
                h, w = (int(v) for v in rng.integers(1, 400, 2))
                img = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
                data = (tf.io.encode_png(img) if i % 2 else tf.io.encode_jpeg(img)).numpy()
                with open(os.path.join(root, split, c, "%02d.%s" % (i, "png" if i % 2 else
                                                                     "jpg")), "wb") as f:
                    f.write(data)
    fails, worst = [], {}
    for _ in range(4):
        size = tuple(int(v) for v in rng.integers(1, 260, 2))
        for nearest in (False, True):
            for crop in (False, True):
                tag = (f"sweep {'%dx%d' % size} {'nearest' if nearest else 'bilinear'}"
                       f"{' crop' if crop else ''}")
                got = data_load(tool, root, os.path.join(work, "out"), "train", "rgb", size,
                                nearest, crop)
                kx, ky, paths = keras_split(root, "train", "rgb", size, nearest, crop)
                fails += compare(tag, got[:2], (kx, ky), paths, size, worst)
    print("folder-pixels: sweep of 24 random sizes to 4 random sizes: " + ", ".join(
        f"{f} {k} {d * 255:g}" for (f, k), d in sorted(worst.items())))
    return fails


def controls(tool, roots, work, kept):
    """Each must be reported as a difference, or the comparison could not fail."""
    fails = []
    gx, gy, kx, ky, paths, csize = kept[("full", "rgb", SIZE, False, False)]
    shifted = compare("control", (gx, gy), (np.roll(kx, 1, 0), np.roll(ky, 1)), paths, csize,
                      {})
    shifted_x = compare("control", (gx, gy), (np.roll(kx, 1, 0), ky), paths, csize, {})
    i = next(k for k, p in enumerate(paths) if fmt(p) == "PNG" and native_size(p) == SIZE)
    flipped = gx.copy()
    flipped[i, 5, 7, 1] = (np.round(flipped[i, 5, 7, 1] * 255) + 1) / np.float32(255)
    flip = compare("control", (flipped, gy), (kx, ky), paths, csize, {})
    print(f"folder-pixels: control: shifted order and labels -> {len(shifted)} failure(s), "
          f"shifted pixels only -> {len(shifted_x)} failure(s), one PNG value +1/255 -> "
          f"{len(flip)} failure(s): {flip[0] if flip else ''}")
    fails += [] if shifted else ["control: a shifted order passed"]
    fails += [] if shifted_x else ["control: pixels shifted by one example passed"]
    fails += [] if flip else ["control: one value off by 1/255 in an exact PNG passed"]
    swapped = os.path.join(work, "shards-swapped")
    tpaths = keras_split(roots["full"], "test", "rgb", SIZE, False, False)
    write_shards(roots["full"], swapped, {"train": (paths, gy), "test": (tpaths[2], tpaths[1])},
                 swap=True)
    sx, sy, _ = data_load(tool, swapped, os.path.join(work, "sw"), "train", "rgb", SIZE, False,
                          False)
    same = np.array_equal(gx.view(np.uint32), sx.view(np.uint32)) and np.array_equal(gy, sy)
    print(f"folder-pixels: control: shards with two records swapped "
          f"{'EQUAL the folder' if same else 'differ from the folder'}")
    return fails + (["control: swapped shards equal the folder"] if same else [])


def main():
    tool, work = sys.argv[1], sys.argv[2]
    roots = make_folders(work)
    alts = {}
    for variant, root in roots.items():
        by_split = {}
        for split in ("train", "test"):
            _, y, paths = keras_split(root, split, "rgb" if variant != "pngbmp" else "rgba",
                                      SIZE, False, False)
            by_split[split] = (paths, y)
        write_shards(root, os.path.join(work, "shards-" + variant), by_split)
        alts[variant] = [("TFRecord shards", os.path.join(work, "shards-" + variant), ()),
                         ("a decoding pool of 2 threads", root, ("--decode-threads", "2"))]
        if variant == "full":  # features of other names, given by --image-key, --label-key
            write_shards(root, os.path.join(work, "shards-keys"), by_split,
                         keys=("jpeg_bytes", "class_id"))
            alts[variant].append(("shards of other keys", os.path.join(work, "shards-keys"),
                                  ("--image-key", "jpeg_bytes", "--label-key", "class_id")))
    fails, worst, kept = [], {}, {}
    for case in CASES:
        try:
            fails += run_case(tool, roots, alts, work, case, worst, kept)
        except RuntimeError as e:
            fails.append(str(e))
    for tag, per in worst.items():
        print(f"folder-pixels: {tag}: " + ", ".join(
            f"{f} {k} {d * 255:g}" for (f, k), d in sorted(per.items())) + "  (max |data_load -"
            " Keras| in levels of 255)")
    fails += sweep(tool, work)
    fails += controls(tool, roots, work, kept)
    for f in fails:
        print("FAIL", f)
    print(f"folder-pixels: {len(CASES) * 2} comparisons with Keras, the shards and the pool, "
          f"{len(fails)} failures")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
