"""Every model description mwtrain reads goes out as a .keras archive Keras loads.

For each good Keras JSON of tests/data/keras (Keras 2 / tf.keras, the older layer-list
shape, both TensorFlow.js wrappers: config.json is then written from the layers; Keras 3:
it passes through), a one-step mwtrain run evaluated on the first 1,000 test images, then
`export --format keras`: keras.models.load_model() opens it; it holds bitwise the trained
weights (--dump-weights) and as many parameters; Keras' model.evaluate on the same images
gives mwtrain's test accuracy (metrics.csv) to 0.1 % (one image) and its loss to 1e-4
relative (computed here from Keras' predictions: the data loss, as mwtrain's test loss).
"""
import glob
import os

import keras
import numpy as np

import oracle as o

x, y = o.test_set()
x, y = x[:1000], y[:1000]
src = os.path.join(os.environ.get("MW_SRCDIR", os.path.join(os.path.dirname(__file__), "..", "..")),
                   "tests", "data", "keras")
files = sorted(glob.glob(os.path.join(src, "*.json")))
o.check(len(files) >= 6, f"{len(files)} model files under {src}")
for path in files:
    name = os.path.basename(path)
    d = o.workdir()
    ck, logs, dump, out = (os.path.join(d, n) for n in ("ck", "logs", "w.bin", "m.keras"))
    o.mwtrain("train", "--model", path, "--epochs", "1", "--steps-per-epoch", "1",
              "--test-examples", "1000", "--checkpoint-dir", ck, "--summary-dir", logs,
              "--dump-weights", dump, "--progress", "none", cwd=d)
    o.mwtrain("export", "--checkpoint-dir", ck, "--format", "keras", "--output", out, cwd=d)
    k = keras.models.load_model(out)
    got, ref = o.flat_weights(k), np.fromfile(dump, "<f4")
    o.check(got.size == ref.size and np.array_equal(got, ref),
            f"{name}: Keras loads bitwise the trained weights ({got.size} of {ref.size})")
    head, rows = o.read_csv(os.path.join(logs, "metrics.csv"))
    mw_loss, mw_acc = rows[-1][head.index("test/loss")], rows[-1][head.index("test/accuracy")]
    xs = x.reshape((len(x),) + tuple(k.input_shape[1:]))
    pred = k.predict(xs, batch_size=500, verbose=0)
    if k.layers[-1].get_config().get("activation") == "softmax":
        logp = np.log(np.maximum(pred, 1e-30))
    else:
        logp = pred - np.log(np.sum(np.exp(pred - pred.max(1, keepdims=True)), 1,
                                    keepdims=True)) - pred.max(1, keepdims=True)
    k_loss = float(-np.mean(logp[np.arange(len(y)), y]))
    k_acc = float(np.mean(np.argmax(pred, 1) == y))
    rel = abs(mw_loss - k_loss) / abs(k_loss)
    o.check(rel <= 1e-4, f"{name}: test loss mwtrain {mw_loss:.9g}, Keras {k_loss:.9g} "
            f"(relative {rel:.1e})")
    o.check(abs(mw_acc - k_acc) <= 1e-3 + 1e-9,
            f"{name}: test accuracy mwtrain {100 * mw_acc:.1f} %, Keras {100 * k_acc:.1f} %")
o.finish()
