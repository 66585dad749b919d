"""The MobileNet / EfficientNet pieces through a .keras archive and back: ReLU(max_value=6),
hard_silu, SpatialDropout2D, a Dropout with a mask per example, Rescaling after a layer, an
adapted Normalization (its mean, variance and integer count in .weights.h5) and a global
average with keepdims. Keras saves it, mwtrain trains it briefly from the archive and exports
it; then keras.models.load_model() opens the export with every variable, its weights are
mwtrain's bitwise (--dump-weights), the Normalization's statistics are the source's unchanged
(state, never trained; the count still the integer 100), and Keras' test accuracy is the one
mwtrain reported (to 0.01 %), which checks the forward of every piece against Keras'.

    tests/keras/run.sh misc_layers_e2e.py
"""
import os
import warnings

import keras
import numpy as np
from keras import layers

import oracle as o

x, y = o.test_set()
keras.utils.set_random_seed(5)
inp = keras.Input((28, 28, 1))
h = layers.Conv2D(16, 3, strides=2)(inp)
h = layers.ReLU(max_value=6.0)(h)
h = layers.Conv2D(16, 3, strides=2, activation="hard_silu")(h)
h = layers.SpatialDropout2D(0.1)(h)
h = layers.Dropout(0.1, noise_shape=(None, 1, 1, 1))(h)
h = layers.Rescaling(0.5, offset=0.1)(h)
h = layers.Normalization(name="adapted")(h)
g = layers.GlobalAveragePooling2D(keepdims=True)(h)
out = layers.Dense(10, activation="softmax")(layers.Flatten()(layers.Concatenate()([
    layers.Flatten()(h), layers.Flatten()(g)])))
model = o.compile_like_mwtrain(keras.Model(inp, out, name="misc_layers"))
rng = np.random.default_rng(2)
stats = [rng.uniform(-0.2, 0.2, 16).astype(np.float32),
         rng.uniform(0.5, 2.0, 16).astype(np.float32), np.array(100)]
model.get_layer("adapted").set_weights(stats)

d = o.workdir()
src, ck, logs, dump = (os.path.join(d, n) for n in ("src.keras", "ck", "logs", "w.bin"))
model.save(src)
o.mwtrain("train", "--model", src, "--epochs", "1", "--steps-per-epoch", "60",
          "--checkpoint-dir", ck, "--summary-dir", logs, "--dump-weights", dump,
          "--progress", "none", cwd=d)
head, rows = o.read_csv(os.path.join(logs, "metrics.csv"))
mw_acc = rows[-1][head.index("test/accuracy")]
kpath = os.path.join(d, "out.keras")
o.mwtrain("export", "--checkpoint-dir", ck, "--format", "keras", "--output", kpath, cwd=d)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    k = keras.models.load_model(kpath)
skipped = [str(w.message) for w in caught if "Skipping" in str(w.message)]
o.check(not skipped, f"load_model loads every variable {skipped[:1]}")
got, ref = o.flat_weights(k), np.fromfile(dump, "<f4")
o.check(got.size == ref.size and np.array_equal(got, ref),
        f"the .keras holds mwtrain's weights bitwise ({got.size} values)")
norm = k.get_layer("adapted").get_weights()
o.check(all(np.array_equal(a, b) for a, b in zip(norm[:2], stats[:2])) and int(norm[2]) == 100
        and np.asarray(norm[2]).dtype.kind == "i",
        f"Normalization's mean, variance and int count unchanged ({norm[2]!r})")
_, k_acc = k.evaluate(x, y, batch_size=500, verbose=0)
o.check(abs(mw_acc - k_acc) <= 1e-4 + 1e-9,
        f"test accuracy Keras {100 * k_acc:.2f} %, mwtrain {100 * mw_acc:.2f} % (to 0.01 %)")
o.finish()
