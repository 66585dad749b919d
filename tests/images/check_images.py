"""mwtrain's image decoding and resizing (worker/data/image_decode.h, through tests/images/
image_load) against TensorFlow's, as Keras 3.15's image_dataset_from_directory calls it:
tf.io.decode_image(channels=N, expand_animations=False), then tf.image.resize (bilinear or
nearest, half-pixel centers, no antialiasing) or Keras' smart_resize (crop_to_aspect_ratio).

A folder of JPEG, PNG, GIF and BMP files of mixed sizes and modes is written first: JPEG and
most PNG files by TensorFlow's own encoders, palette, low-bit-depth and tRNS PNG files, GIF and
BMP files by the small writers below, CMYK and YCCK JPEG files (with and without Adobe's
marker) by tests/images/cmyk_jpeg (TensorFlow has no encoder for any of them). Then, for each color
mode (grayscale, rgb, rgba):
  - decoded at their own size, every file's pixels equal TensorFlow's exactly (PNG must; JPEG,
    GIF and BMP are held to it too, the largest difference is printed per format);
  - resized (bilinear, nearest, bilinear after the aspect-ratio crop), they differ by at most
    1.0 on the 0..255 scale (1/255 after Keras' usual rescale; both sides compute in float32
    from equal pixels, so what remains is the rounding of the weights, far below that);
  - a file TensorFlow refuses in that mode (a GIF as grayscale or rgba, a JPEG as rgba, a BMP
    as grayscale) ends image_load with exit 3 and a message naming it.
image_dataset_from_directory itself reads the folder once (rgb, bilinear, then crop) and its
batches are compared the same way, so the decode_image + resize calls above are the ones Keras
makes. The control: mwtrain's nearest-neighbour pixels against TensorFlow's bilinear ones must
differ by more than the tolerance, or the comparison could not fail.

    check_images.py IMAGE_LOAD CMYK_JPEG WORK_DIR
"""
import os
import struct
import subprocess
import sys
import zlib

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

TOL = 1.0  # the 0..255 scale: 1/255 after rescaling
SIZE = (24, 32)  # the model's input (height, width)
RNG = np.random.default_rng(7)


def photo(h, w, c):
    """A smooth image with some noise, so JPEG's blocks carry detail but compress as photos."""
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    chans = []
    for k in range(c):
        v = 127 + 90 * np.sin(x / (3 + 2 * k) + y / (5 + k)) + RNG.normal(0, 12, (h, w))
        chans.append(v)
    return np.clip(np.stack(chans, -1), 0, 255).astype(np.uint8)


def png_chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(
        ">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def png_raw(w, h, bit_depth, color_type, rows, plte=None, trns=None, interlace=0, extra=b""):
    """A PNG of already-packed rows (filter 0; for an interlaced one, the passes' rows one
    after the other); extra: chunks before PLTE."""
    out = b"\x89PNG\r\n\x1a\n" + png_chunk(
        b"IHDR", struct.pack(">IIBBBBB", w, h, bit_depth, color_type, 0, 0, interlace)) + extra
    if plte is not None:
        out += png_chunk(b"PLTE", bytes(plte))
    if trns is not None:
        out += png_chunk(b"tRNS", bytes(trns))
    out += png_chunk(b"IDAT", zlib.compress(b"".join(b"\0" + r for r in rows)))
    return out + png_chunk(b"IEND", b"")


def adam7_rows(img):
    """The rows of an 8-bit image's seven Adam7 passes, in order (empty passes have none)."""
    rows = []
    for xs, ys, dx, dy in ((0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4),
                           (1, 0, 2, 2), (0, 1, 1, 2)):
        sub = img[ys::dy, xs::dx]
        if sub.shape[0] and sub.shape[1]:
            rows += [r.tobytes() for r in sub]
    return rows


def pack_bits(idx, bits):
    """Rows of indices packed bits per pixel, most significant first."""
    rows = []
    for r in idx:
        acc, n, out = 0, 0, bytearray()
        for v in r:
            acc, n = (acc << bits) | int(v), n + bits
            if n == 8:
                out.append(acc)
                acc, n = 0, 0
        if n:
            out.append(acc << (8 - n))
        rows.append(bytes(out))
    return rows


def gif_frame(frame, left=0, top=0, interlace=False):
    """One image descriptor and its LZW data (8-bit indices), codes kept 9 bits wide by a clear
    code before the table can grow."""
    fh, fw = frame.shape
    order = list(range(fh))
    if interlace:
        order = [y for s, d in ((0, 8), (4, 8), (2, 4), (1, 2)) for y in range(s, fh, d)]
    codes = []
    for i, v in enumerate(int(v) for y in order for v in frame[y]):
        if i % 250 == 0:
            codes.append(256)
        codes.append(v)
    codes.append(257)
    acc, n, data = 0, 0, bytearray()
    for c in codes:
        acc |= c << n
        n += 9
        while n >= 8:
            data.append(acc & 255)
            acc >>= 8
            n -= 8
    if n:
        data.append(acc)
    out = b"," + struct.pack("<HHHHB", left, top, fw, fh, 0x40 if interlace else 0) + b"\x08"
    for i in range(0, len(data), 255):
        blk = data[i:i + 255]
        out += bytes([len(blk)]) + blk
    return out + b"\x00"


def gif(sw, sh, pal, frame, left=0, top=0, transparent=None, interlace=False, more=()):
    """A GIF89a of a 256-color global palette, a first frame and more frames (TensorFlow's
    canvas is the largest frame, whatever the screen says)."""
    out = b"GIF89a" + struct.pack("<HHBBB", sw, sh, 0xF7, 0, 0) + bytes(pal)
    if transparent is not None:
        out += b"\x21\xf9\x04" + bytes([1, 0, 0, transparent, 0])
    out += gif_frame(frame, left, top, interlace)
    for f in more:
        out += gif_frame(f)
    return out + b";"


def bmp(img, top_down=False):
    """An uncompressed 24- or 32-bit BMP (BGR(A), rows padded to 4 bytes)."""
    h, w, c = img.shape
    row = (w * c + 3) // 4 * 4
    rows = [img[y][:, [2, 1, 0] + ([3] if c == 4 else [])].tobytes() for y in range(h)]
    rows = [r + b"\0" * (row - len(r)) for r in rows]
    data = b"".join(rows if top_down else rows[::-1])
    hdr = struct.pack("<IiiHHIIiiII", 40, w, -h if top_down else h, 1, 8 * c, 0, len(data),
                      2835, 2835, 0, 0)
    return b"BM" + struct.pack("<IHHI", 54 + len(data), 0, 0, 54) + hdr + data


def make_folder(root, cmyk_jpeg):
    """The files, in two class folders (a/, b/) so image_dataset_from_directory reads them."""
    files = {}
    os.makedirs(os.path.join(root, "a"), exist_ok=True)
    for kind, h, w in (("adobe", 21, 34), ("plain", 16, 16), ("ycck", 40, 27)):
        rel = f"a/j_cmyk_{kind}.jpg"
        subprocess.run([cmyk_jpeg, kind, str(h), str(w), os.path.join(root, rel)], check=True)
    enc = lambda a, **k: tf.io.encode_jpeg(a, **k).numpy()  # noqa: E731
    files["a/j_rgb.jpg"] = enc(photo(37, 53, 3), quality=90)
    files["a/j_gray.jpg"] = enc(photo(64, 48, 1), quality=75)
    files["a/j_444.jpg"] = enc(photo(50, 30, 3), quality=95, chroma_downsampling=False)
    files["a/j_prog.jpg"] = enc(photo(120, 200, 3), progressive=True)
    files["a/j_tiny.jpg"] = enc(photo(5, 7, 3))
    files["a/p_gray.png"] = tf.io.encode_png(photo(30, 41, 1)).numpy()
    files["a/p_ga.png"] = tf.io.encode_png(photo(33, 20, 2)).numpy()
    files["a/p_rgb.png"] = tf.io.encode_png(photo(24, 32, 3)).numpy()
    files["b/p_rgba.png"] = tf.io.encode_png(photo(45, 61, 4)).numpy()
    files["b/p_rgb16.png"] = tf.io.encode_png(
        (photo(21, 26, 3).astype(np.uint16) * 257 + RNG.integers(0, 257, (21, 26, 3))
         ).astype(np.uint16)).numpy()
    files["b/p_gray16.png"] = tf.io.encode_png(
        (photo(19, 40, 1).astype(np.uint16) * 256).astype(np.uint16)).numpy()
    pal = RNG.integers(0, 256, 256 * 3).tolist()
    idx = RNG.integers(0, 256, (27, 35))
    files["b/p_pal8.png"] = png_raw(35, 27, 8, 3, [bytes(r.astype(np.uint8)) for r in idx], pal)
    idx4 = RNG.integers(0, 16, (22, 17))
    files["b/p_pal4_trns.png"] = png_raw(17, 22, 4, 3, pack_bits(idx4, 4), pal[:48],
                                         trns=[0, 128, 255, 7])
    files["b/p_pal4.png"] = png_raw(17, 22, 4, 3, pack_bits(idx4, 4), pal[:48])
    inter = photo(13, 11, 3)
    files["b/p_adam7.png"] = png_raw(11, 13, 8, 2, adam7_rows(inter), interlace=1)
    files["b/p_gamma.png"] = png_raw(9, 6, 8, 2, [r.tobytes() for r in photo(6, 9, 3)],
                                     extra=png_chunk(b"gAMA", struct.pack(">I", 45455)))
    files["b/p_gray1.png"] = png_raw(29, 13, 1, 0, pack_bits(RNG.integers(0, 2, (13, 29)), 1))
    files["b/p_gray2_trns.png"] = png_raw(15, 9, 2, 0, pack_bits(RNG.integers(0, 4, (9, 15)), 2),
                                          trns=[0, 2])
    files["b/g_full.gif"] = gif(40, 30, pal, RNG.integers(0, 256, (30, 40)))
    files["b/g_part.gif"] = gif(44, 36, pal, RNG.integers(0, 256, (20, 25)), left=9, top=7,
                                transparent=3)
    files["b/g_anim.gif"] = gif(30, 30, pal, RNG.integers(0, 256, (12, 14)), left=3, top=2,
                                more=[RNG.integers(0, 256, (21, 11)), RNG.integers(0, 256, (9, 26))])
    files["b/g_inter.gif"] = gif(23, 31, pal, RNG.integers(0, 256, (31, 23)), interlace=True)
    files["b/m_rgb.bmp"] = bmp(photo(19, 27, 3))
    files["b/m_rgba_td.bmp"] = bmp(photo(26, 21, 4), top_down=True)
    for rel, data in files.items():
        os.makedirs(os.path.join(root, os.path.dirname(rel)), exist_ok=True)
        with open(os.path.join(root, rel), "wb") as f:
            f.write(data)
    return sorted([os.path.join(d, f) for d in ("a", "b") for f in os.listdir(
        os.path.join(root, d))])


def fmt(name):
    return {"j": "JPEG", "p": "PNG", "g": "GIF", "m": "BMP"}[os.path.basename(name)[0]]


def tf_pixels(path, channels, mode):
    """TensorFlow's pixels as Keras computes them (None: TensorFlow refuses the file)."""
    try:
        img = tf.io.decode_image(tf.io.read_file(path), channels=channels,
                                 expand_animations=False)
    except tf.errors.InvalidArgumentError:
        return None
    if mode == "native":
        return img.numpy().astype(np.float32)
    interp = "nearest" if mode == "nearest" else "bilinear"
    if mode == "crop":
        from keras.src.backend import tensorflow as tf_backend
        from keras.src.utils import image_utils
        img = image_utils.smart_resize(img, SIZE, interpolation=interp,
                                       data_format="channels_last", backend_module=tf_backend)
    else:
        img = tf.image.resize(img, SIZE, method=interp)
    return np.asarray(img, np.float32)


def mw_pixels(image_load, out, path, channels, mode):
    """image_load's pixels, or (exit code, stderr) when it refuses the file."""
    args = [image_load, "--channels", str(channels)]
    args += ["--native"] if mode == "native" else ["--size", str(SIZE[0]), str(SIZE[1])]
    args += {"nearest": ["--nearest"], "crop": ["--crop"]}.get(mode, [])
    r = subprocess.run(args + [out, path], capture_output=True, text=True)
    if r.returncode != 0:
        return (r.returncode, r.stderr.strip())
    base, _, h, w, c = r.stdout.split()
    return np.fromfile(os.path.join(out, base + ".f32"), np.float32).reshape(int(h), int(w),
                                                                              int(c))


def compare(image_load, root, out, names):
    """Every file, mode and channel count; returns the failures and prints the differences."""
    fails, worst = [], {}
    for channels in (1, 3, 4):
        for mode in ("native", "bilinear", "nearest", "crop"):
            for name in names:
                path = os.path.join(root, name)
                want, got = tf_pixels(path, channels, mode), mw_pixels(image_load, out, path,
                                                                       channels, mode)
                tag = f"{name} channels={channels} {mode}"
                if want is None or isinstance(got, tuple):
                    ok = (want is None and isinstance(got, tuple) and got[0] == 3 and
                          path in got[1] and "tf.io.decode_image" in got[1])
                    if not ok:
                        fails.append(f"{tag}: TensorFlow {'refuses' if want is None else 'reads'}"
                                     f" it, image_load gave {got if isinstance(got, tuple) else 'pixels'}")
                    continue
                if got.shape != want.shape:
                    fails.append(f"{tag}: shape {got.shape}, TensorFlow's {want.shape}")
                    continue
                d = float(np.max(np.abs(got - want)))
                key = (fmt(name), "native" if mode == "native" else "resized")
                worst[key] = max(worst.get(key, 0.0), d)
                limit = 0.0 if mode == "native" else TOL
                if d > limit:
                    fails.append(f"{tag}: max |difference| {d:g} > {limit:g}")
    for (f, m), d in sorted(worst.items()):
        print(f"images: {f:4s} {m:7s} max |mwtrain - TensorFlow| = {d:g}")
    return fails


def keras_folder(image_load, root, out):
    """image_dataset_from_directory's own batches (rgb) against image_load's."""
    import keras
    fails = []
    for crop in (False, True):
        ds = keras.utils.image_dataset_from_directory(
            root, image_size=SIZE, batch_size=64, shuffle=False, crop_to_aspect_ratio=crop,
            verbose=False)
        x = np.concatenate([b[0].numpy() for b in ds])
        worst = 0.0
        for i, path in enumerate(ds.file_paths):
            got = mw_pixels(image_load, out, path, 3, "crop" if crop else "bilinear")
            d = float(np.max(np.abs(got - x[i])))
            worst = max(worst, d)
            if d > TOL:
                fails.append(f"image_dataset_from_directory crop={crop} {path}: {d:g} > {TOL:g}")
        print(f"images: image_dataset_from_directory (rgb, crop={crop}): {len(ds.file_paths)} "
              f"files, max |mwtrain - Keras| = {worst:g}")
    return fails


def control(image_load, root, out, names):
    """Nearest against bilinear must exceed the tolerance somewhere."""
    d = 0.0
    for name in names:
        path = os.path.join(root, name)
        d = max(d, float(np.max(np.abs(mw_pixels(image_load, out, path, 3, "nearest") -
                                       tf_pixels(path, 3, "bilinear")))))
    print(f"images: control: mwtrain nearest against TensorFlow bilinear differ by {d:g}")
    return [] if d > TOL else [f"control: nearest and bilinear within {TOL:g}: the check is blind"]


def main():
    image_load, cmyk_jpeg, work = sys.argv[1], sys.argv[2], sys.argv[3]
    root, out = os.path.join(work, "folder"), os.path.join(work, "out")
    os.makedirs(out, exist_ok=True)
    names = make_folder(root, cmyk_jpeg)
    jpeg_png = [n for n in names if fmt(n) in ("JPEG", "PNG")]
    fails = compare(image_load, root, out, names)
    fails += keras_folder(image_load, root, out)
    fails += control(image_load, root, out, jpeg_png)
    for f in fails:
        print("FAIL", f)
    print(f"images: {len(fails)} failures")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
