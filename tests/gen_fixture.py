#!/usr/bin/python3
"""Generate tests/data/cnn_fixture.bin: an external (PyTorch, float64) oracle
for mwtrain's CNN forward pass, loss, gradients and one optimizer step.

Run from anywhere:  /usr/bin/python3 tests/gen_fixture.py [--out PATH]

The model is the TF tutorial CNN in Keras layout (channels_last, NHWC):
  input 28x28x1 -> Conv2D(32,3x3,valid)+ReLU -> MaxPool 2x2/2
  -> Conv2D(64,3x3,valid)+ReLU -> MaxPool 2x2/2 -> Flatten (h,w,c order)
  -> Dense(64)+ReLU -> Dense(10) logits
Loss: sparse softmax cross-entropy from logits, mean over the batch.

All parameters are kept in Keras layouts; torch works on permuted views, so
autograd returns gradients already in Keras layout. The format is documented
in tests/data/README.md.  Deterministic: torch.manual_seed(1234).
"""
import argparse
import gzip
import math
import os
import struct
import sys

import numpy as np
import torch
import torch.nn.functional as F

MAGIC = b"MWFX"
VERSION = 1
SEED = 1234
BATCH = 16
DATA_DIR = "/usr/share/datasets/fashion-mnist"

# (Keras name, Keras shape), in the order of the flat parameter buffer.
PARAMS = [
    ("conv2d/kernel", (3, 3, 1, 32)),
    ("conv2d/bias", (32,)),
    ("conv2d_1/kernel", (3, 3, 32, 64)),
    ("conv2d_1/bias", (64,)),
    ("dense/kernel", (1600, 64)),
    ("dense/bias", (64,)),
    ("dense_1/kernel", (64, 10)),
    ("dense_1/bias", (10,)),
]

# Keras Adam (optimizer_v2 / legacy formula) and SGD-with-momentum settings.
ADAM_LR, ADAM_B1, ADAM_B2, ADAM_EPS = 1e-3, 0.9, 0.999, 1e-7
SGD_LR, SGD_MOMENTUM = 0.01, 0.9
BIAS_RANGE = 0.1  # biases ~ U(-0.1, 0.1): non-zero so bias grads are non-trivial


def read_idx_gz(path, expect_magic):
    with gzip.open(path, "rb") as f:
        raw = f.read()
    magic = struct.unpack(">I", raw[:4])[0]
    if magic != expect_magic:
        raise ValueError(f"{path}: bad IDX magic {magic:#x}")
    ndim = magic & 0xFF
    dims = struct.unpack(">" + "I" * ndim, raw[4:4 + 4 * ndim])
    data = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    return data.reshape(dims)


def load_batch(gen, data_dir):
    """Return (images uint8 (16,28,28), labels int64 (16), source string)."""
    img_path = os.path.join(data_dir, "t10k-images-idx3-ubyte.gz")
    lab_path = os.path.join(data_dir, "t10k-labels-idx1-ubyte.gz")
    try:
        imgs = read_idx_gz(img_path, 0x00000803)[:BATCH]
        labs = read_idx_gz(lab_path, 0x00000801)[:BATCH]
        return imgs.copy(), labs.astype(np.int64), "fashion-mnist t10k 0..15"
    except (OSError, ValueError, EOFError) as e:
        print(f"warning: {e}; using random images/labels", file=sys.stderr)
        imgs = torch.randint(0, 256, (BATCH, 28, 28), generator=gen).numpy().astype(np.uint8)
        labs = torch.randint(0, 10, (BATCH,), generator=gen).numpy().astype(np.int64)
        return imgs, labs, "random (seeded)"


def fans(shape):
    if len(shape) == 4:  # (KH, KW, Cin, Cout)
        rf = shape[0] * shape[1]
        return shape[2] * rf, shape[3] * rf
    return shape[0], shape[1]  # dense (in, out)


def init_params(gen):
    """Glorot-uniform kernels, small random biases; rounded to float32 and
    then promoted to float64 so the oracle starts from exactly the stored
    float32 values."""
    params = {}
    for name, shape in PARAMS:
        if name.endswith("/kernel"):
            fan_in, fan_out = fans(shape)
            limit = math.sqrt(6.0 / (fan_in + fan_out))
        else:
            limit = BIAS_RANGE
        u = torch.rand(shape, generator=gen, dtype=torch.float64)
        p = ((2.0 * u - 1.0) * limit).to(torch.float32).to(torch.float64)
        params[name] = p
    return params


def pool_last_max(x):
    """2x2/2 max pool whose backward routes ties to the LAST maximum of each
    window (torch routes to the first); used to show the fixture does not
    depend on the tie-breaking rule."""
    n, c, h, w = x.shape
    h2, w2 = h // 2, w // 2
    win = x[:, :, :2 * h2, :2 * w2].reshape(n, c, h2, 2, w2, 2)
    win = win.permute(0, 1, 2, 4, 3, 5).reshape(n, c, h2, w2, 4).flip(-1)
    return win.gather(-1, win.argmax(-1, keepdim=True)).squeeze(-1)


def forward(x_nhwc, p, pool=None):
    """Keras-semantics forward with torch ops. x_nhwc: (N,28,28,1)."""
    pool = pool or (lambda t: F.max_pool2d(t, 2, 2))
    x = x_nhwc.permute(0, 3, 1, 2)                                 # NCHW
    x = F.conv2d(x, p["conv2d/kernel"].permute(3, 2, 0, 1), p["conv2d/bias"])
    x = pool(F.relu(x))                                            # (N,32,13,13)
    x = F.conv2d(x, p["conv2d_1/kernel"].permute(3, 2, 0, 1), p["conv2d_1/bias"])
    x = pool(F.relu(x))                                            # (N,64,5,5)
    x = x.permute(0, 2, 3, 1).reshape(x.shape[0], -1)              # Keras (h,w,c)
    x = F.relu(x @ p["dense/kernel"] + p["dense/bias"])
    return x @ p["dense_1/kernel"] + p["dense_1/bias"]


def numpy_forward(x, p):
    """Independent NHWC forward in plain numpy (float64) to cross-check the
    torch layout plumbing (permutes, flatten order)."""
    def conv(a, k, b):  # a (N,H,W,C), k (KH,KW,Cin,Cout), valid, stride 1
        n, h, w, _ = a.shape
        kh, kw, _, co = k.shape
        out = np.zeros((n, h - kh + 1, w - kw + 1, co))
        for i in range(kh):
            for j in range(kw):
                out += np.einsum("nhwc,co->nhwo", a[:, i:i + h - kh + 1, j:j + w - kw + 1, :], k[i, j])
        return out + b

    def pool(a):  # 2x2 stride 2, floor
        n, h, w, c = a.shape
        h2, w2 = h // 2, w // 2
        a = a[:, :2 * h2, :2 * w2, :].reshape(n, h2, 2, w2, 2, c)
        return a.max(axis=(2, 4))

    q = {k: v.numpy() for k, v in p.items()}
    a = pool(np.maximum(conv(x, q["conv2d/kernel"], q["conv2d/bias"]), 0))
    a = pool(np.maximum(conv(a, q["conv2d_1/kernel"], q["conv2d_1/bias"]), 0))
    a = a.reshape(a.shape[0], -1)
    a = np.maximum(a @ q["dense/kernel"] + q["dense/bias"], 0)
    return a @ q["dense_1/kernel"] + q["dense_1/bias"]


def adam_step(p, g, t=1):
    m = (1.0 - ADAM_B1) * g
    v = (1.0 - ADAM_B2) * g * g
    lr_t = ADAM_LR * math.sqrt(1.0 - ADAM_B2 ** t) / (1.0 - ADAM_B1 ** t)
    return p - lr_t * m / (torch.sqrt(v) + ADAM_EPS)


def sgd_step(p, g):
    vel = SGD_MOMENTUM * torch.zeros_like(p) - SGD_LR * g
    return p + vel


def write_fixture(path, records):
    buf = bytearray()
    buf += MAGIC
    buf += struct.pack("<II", VERSION, len(records))
    for name, arr in records:
        a = np.ascontiguousarray(np.asarray(arr, dtype="<f4"))
        nb = name.encode("ascii")
        assert b"\0" not in nb
        buf += struct.pack("<I", len(nb)) + nb
        buf += struct.pack("<I", a.ndim) + struct.pack("<" + "I" * a.ndim, *a.shape)
        buf += a.tobytes(order="C")
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(buf)
    os.replace(tmp, path)
    return len(buf)


def read_fixture(path):
    """Reader (used for the self-check; also a reference for C readers)."""
    with open(path, "rb") as f:
        raw = f.read()
    assert raw[:4] == MAGIC, "bad magic"
    version, count = struct.unpack_from("<II", raw, 4)
    assert version == VERSION
    off, out = 12, []
    for _ in range(count):
        (nl,) = struct.unpack_from("<I", raw, off); off += 4
        name = raw[off:off + nl].decode("ascii"); off += nl
        (nd,) = struct.unpack_from("<I", raw, off); off += 4
        dims = struct.unpack_from("<" + "I" * nd, raw, off); off += 4 * nd
        n = int(np.prod(dims)) if nd else 1
        data = np.frombuffer(raw, dtype="<f4", count=n, offset=off).reshape(dims); off += 4 * n
        out.append((name, data))
    assert off == len(raw), "trailing bytes"
    return out


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(here, "data", "cnn_fixture.bin"))
    ap.add_argument("--data-dir", default=DATA_DIR,
                    help="Fashion-MNIST IDX dir (falls back to seeded random data)")
    args = ap.parse_args()

    torch.manual_seed(SEED)
    gen = torch.Generator().manual_seed(SEED)
    torch.set_num_threads(1)  # deterministic float64 reductions, small machine

    imgs_u8, labels, source = load_batch(gen, args.data_dir)
    # Images exactly as the C side builds them: float32(k) / 255.0f
    images32 = (imgs_u8.astype(np.float32) / np.float32(255.0)).reshape(BATCH, 28, 28, 1)
    x = torch.from_numpy(images32.astype(np.float64))
    y = torch.from_numpy(labels)

    params = init_params(gen)
    leaves = {k: v.clone().requires_grad_(True) for k, v in params.items()}
    logits = forward(x, leaves)
    losses = F.cross_entropy(logits, y, reduction="none")
    loss = losses.sum() / BATCH
    loss.backward()
    grads = {k: leaves[k].grad.detach().clone() for k in leaves}

    # Self-checks: layout cross-check with plain numpy, closed-form CE,
    # and a few central finite differences on the gradients.
    ref = numpy_forward(images32.astype(np.float64), params)
    lg = logits.detach()
    assert np.allclose(lg.numpy(), ref, rtol=0, atol=1e-10), "torch/numpy forward mismatch"
    ce = torch.logsumexp(lg, 1) - lg[torch.arange(BATCH), y]
    assert torch.allclose(ce, losses.detach(), atol=1e-12)
    fd_worst = 0.0
    with torch.no_grad():
        for name, _ in PARAMS:
            flat = params[name].view(-1)
            g = grads[name].view(-1)
            idxs = [int(torch.argmax(g.abs())), 0, flat.numel() - 1]
            for i in idxs:
                h = 1e-6
                old = flat[i].item()
                flat[i] = old + h
                lp = F.cross_entropy(forward(x, params), y).item()
                flat[i] = old - h
                lm = F.cross_entropy(forward(x, params), y).item()
                flat[i] = old
                fd = (lp - lm) / (2 * h)
                err = abs(fd - g[i].item()) / max(1e-6, abs(fd), abs(g[i].item()))
                fd_worst = max(fd_worst, err)
    assert fd_worst < 1e-4, f"finite-difference check failed ({fd_worst:g})"

    # Robustness of the oracle for a float32 C implementation:
    #  (a) max-pool tie-breaking: background pixels give many exactly tied
    #      windows; routing ties to the last max must give the same gradients;
    #  (b) the same model in float32 must agree to ~1e-6 of max|g| (no ReLU
    #      or pool decision flips between float32 and float64).
    def grads_with(dtype, pool=None):
        lv = {k: v.detach().to(dtype).clone().requires_grad_(True) for k, v in params.items()}
        l = F.cross_entropy(forward(x.to(dtype), lv, pool), y)
        l.backward()
        return l.item(), {k: lv[k].grad.to(torch.float64) for k in lv}

    def worst_rel(other):
        return max(((other[n] - grads[n]).abs().max() / grads[n].abs().max()).item()
                   for n, _ in PARAMS)

    _, g_last = grads_with(torch.float64, pool_last_max)
    tie_worst = worst_rel(g_last)
    assert tie_worst < 1e-12, f"gradients depend on pool tie-breaking ({tie_worst:g})"
    loss32, g32 = grads_with(torch.float32)
    f32_worst = worst_rel(g32)
    assert f32_worst < 1e-4, f"float32 model disagrees with the oracle ({f32_worst:g})"

    records = [("images", images32), ("labels", labels.astype(np.float32))]
    records += [("w/" + n, params[n].numpy()) for n, _ in PARAMS]
    records += [("logits", lg.numpy()), ("losses", losses.detach().numpy()),
                ("loss", np.array([loss.item()]))]
    records += [("g/" + n, grads[n].numpy()) for n, _ in PARAMS]
    records += [("adam/" + n, adam_step(params[n], grads[n]).numpy()) for n, _ in PARAMS]
    records += [("sgd/" + n, sgd_step(params[n], grads[n]).numpy()) for n, _ in PARAMS]

    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    size = write_fixture(args.out, records)

    back = read_fixture(args.out)
    assert [n for n, _ in back] == [n for n, _ in records]
    for (n, a), (_, b) in zip(records, back):
        assert np.array_equal(np.asarray(a, dtype=np.float32), b), n

    pred = lg.argmax(1).numpy()
    print(f"wrote {args.out}: {size} bytes, {len(records)} records, version {VERSION}")
    print(f"batch: {source}; labels {labels.tolist()}")
    print(f"loss (mean CE, float64) = {loss.item():.9f}; float32 = {np.float32(loss.item())!r}")
    print(f"predictions {pred.tolist()} (untrained, {int((pred == labels).sum())}/{BATCH} correct)")
    print(f"self-checks: numpy forward max|diff| = {np.abs(lg.numpy() - ref).max():.2e}, "
          f"finite-difference worst rel err = {fd_worst:.2e}, "
          f"pool tie-break (last vs first max) {tie_worst:.1e}")
    print(f"torch float32 vs oracle: |loss diff| = {abs(loss32 - loss.item()):.1e}, "
          f"worst grad err / max|g| per tensor = {f32_worst:.1e}")
    for name, arr in back:
        a = np.asarray(arr, dtype=np.float64)
        print(f"  {name:<22} {str(tuple(arr.shape)):<16} "
              f"min {a.min():+.6e} max {a.max():+.6e} |mean| {np.abs(a).mean():.6e}")


if __name__ == "__main__":
    main()
