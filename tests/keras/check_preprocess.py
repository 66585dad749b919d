"""Keras's preprocessing layers against mwtrain's input pipeline (worker/data/preprocess.h).

For each case a Keras model [Input, preprocessing layer(s), Flatten, Dense] is written with
to_json(), mwtrain's pipeline runs on the same float32 examples (preprocess_apply), and the
outputs are compared with what the Keras layers compute: in inference mode layer(x,
training=False); in training mode with the random choice forced, layer.transform_images(x,
transformation, training=True), the choices handed to preprocess_apply as well. Prints one
line per case with the largest difference; exits 1 when one is above its tolerance.
    check_preprocess.py PREPROCESS_APPLY TMPDIR    (KERAS_BACKEND=jax)"""
import os
import subprocess
import sys

import numpy as np
import keras
from keras import layers

apply_bin, tmp = sys.argv[1:3]
rng = np.random.default_rng(14)
H, W, C, N = 9, 11, 3, 4  # not square, so a transposed axis shows
x = rng.uniform(0, 255, (N, H, W, C)).astype(np.float32)
failed = 0


def run(name, pre, expected, draws=None, tol=0.0):
    """pre: the preprocessing layers; expected: (N, ...) from Keras; draws: per example, per
    layer (flip, crop_y, crop_x, dy, dx), or None for inference."""
    global failed
    m = keras.Sequential([keras.Input((H, W, C))] + pre + [layers.Flatten(), layers.Dense(2)])
    path = os.path.join(tmp, name)
    open(path + ".json", "w").write(m.to_json())
    x.tofile(path + ".in")
    args = [apply_bin, path + ".json", path + ".in", str(N), path + ".out"]
    if draws is not None:
        with open(path + ".draws", "w") as f:
            for per_example in draws:
                for d in per_example:
                    f.write("%d %d %d %r %r\n" % d)
        args.append(path + ".draws")
    subprocess.run(args, check=True)
    expected = np.asarray(expected, np.float32)
    got = np.fromfile(path + ".out", np.float32).reshape(expected.shape)
    err = float(np.max(np.abs(got - expected)))
    scale = float(np.max(np.abs(expected)))
    ok = err <= tol * max(scale, 1.0)
    print(f"{name}: output {expected.shape[1:]}, max |mwtrain - Keras| {err:.3g} "
          f"(tolerance {tol:g} x {max(scale, 1.0):.3g}) {'ok' if ok else 'FAIL'}")
    if not ok:
        i = np.unravel_index(np.argmax(np.abs(got - expected)), got.shape)
        print(f"  first worst at {i}: mwtrain {got[i]!r}, Keras {expected[i]!r}")
        failed += 1


def infer(layer, v=None):
    """layer at inference. RandomCrop's: Keras 3.6 crops the window its
    get_random_transformation(training=False) places (the aspect-preserving centre, resized
    when it is smaller), as TensorFlow's RandomCrop does and mwtrain; Keras 3.15 returns the
    image uncropped there, whose shape is not the layer's own output shape (a Dense after it
    could not be built), so the 3.6 rule is asked of Keras 3.15 through that same
    transformation and transform_images."""
    v = x if v is None else v
    y = np.asarray(layer(v, training=False))
    if isinstance(layer, layers.RandomCrop) and y.shape[1:3] != (layer.height, layer.width):
        t = layer.get_random_transformation(v, training=False)
        y = np.asarray(layer.transform_images(v, t, training=True))
    return y


# deterministic layers
lay = layers.Rescaling(1 / 255.0, offset=-0.5)
run("rescaling", [lay], infer(lay), tol=1e-6)
lay = layers.Normalization(mean=[100.0, 120.5, 90.0], variance=[900.0, 1600.0, 0.0])
run("normalization_channels", [lay], infer(lay), tol=1e-6)
lay = layers.Normalization(axis=None, mean=127.5, variance=5000.0)
run("normalization_scalar", [lay], infer(lay), tol=1e-6)
lay = layers.Normalization(mean=[1.0, 2.0, 3.0], variance=[4.0, 9.0, 16.0], invert=True)
run("normalization_invert", [lay], infer(lay), tol=1e-6)

# the random layers at inference, and with their choices forced
for mode in ("horizontal", "vertical", "horizontal_and_vertical"):
    lay = layers.RandomFlip(mode)
    run(f"flip_{mode}_inference", [lay], infer(lay))
    flips = np.array([1, 0, 1, 1], bool).reshape(N, 1, 1, 1)
    want = lay.transform_images(x, {"flips": flips}, training=True)
    run(f"flip_{mode}_forced", [lay], want,
        [[(int(f), 0, 0, 0.0, 0.0)] for f in flips.ravel()])

for ch, cw in ((5, 7), (9, 7), (4, 11), (9, 11)):
    lay = layers.RandomCrop(ch, cw)
    run(f"crop_{ch}x{cw}_inference", [lay], infer(lay))
    offs = [(int(rng.integers(0, H - ch + 1)), int(rng.integers(0, W - cw + 1))) for _ in range(N)]
    want = np.concatenate([np.asarray(lay.transform_images(x[i:i + 1], offs[i], training=True))
                           for i in range(N)])
    run(f"crop_{ch}x{cw}_forced", [lay], want, [[(0, oy, ox, 0.0, 0.0)] for oy, ox in offs])

moves = [(-1.6, 2.3), (3.25, -4.5), (0.0, 12.7), (-10.4, -0.5)]  # (dy, dx), some past the edge
for fill in ("reflect", "wrap", "constant", "nearest"):
    for interp in ("bilinear", "nearest"):
        lay = layers.RandomTranslation(0.5, 0.5, fill_mode=fill, interpolation=interp,
                                       fill_value=0.25)
        if interp == "bilinear":
            run(f"translation_{fill}_inference", [lay], infer(lay))
        tr = np.array([[dx, dy] for dy, dx in moves], np.float32)
        want = lay.transform_images(x, {"translations": tr}, training=True)
        run(f"translation_{fill}_{interp}_forced", [lay], want,
            [[(0, 0, 0, float(np.float32(dy)), float(np.float32(dx)))] for dy, dx in moves],
            tol=1e-6)

# a pipeline at inference, as the model itself runs it
pre = [layers.Rescaling(1 / 255.0), layers.RandomFlip("horizontal"), layers.RandomCrop(7, 8),
       layers.RandomTranslation(0.1, 0.1), layers.Normalization(axis=None, mean=0.5, variance=0.04)]
want = x
for lay in pre:  # each layer at inference, as a Sequential of them runs
    want = infer(lay, want)
run("pipeline_inference", pre, want, tol=1e-6)

print(f"{failed} case(s) failed")
sys.exit(1 if failed else 0)
