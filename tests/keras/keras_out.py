"""A model trained by mwtrain goes back to Keras.

Two models: the built-in tutorial CNN (its source is Keras 2 JSON, so config.json is written
from the layers) and an MLP made by Keras and given as --model m.keras (its Keras 3 config
passes through). For each, a short mwtrain run, then:
  1. `export --format keras`: keras.models.load_model() opens it; its weights are bitwise the
     trained ones (--dump-weights); Keras' model.evaluate on the 10,000 test images gives the
     test accuracy mwtrain reported (metrics.csv, 9 digits) to 0.01 % and the loss to 1e-4
     relative, and `mwtrain eval` of the same checkpoint prints that accuracy;
  2. `export --format weights-h5`: model.load_weights() into the same architecture built by
     Keras (from the model JSON for the MLP; in code for the tutorial CNN, whose Keras 2 JSON
     Keras 3 cannot read) gives bitwise the same predictions as the loaded .keras.
"""
import os
import re
import warnings

import keras
import numpy as np

import oracle as o

x, y = o.test_set()
keras.utils.set_random_seed(11)
mlp = o.compile_like_mwtrain(o.mlp())
cases = [("tutorial_cnn", None, o.tutorial_cnn), ("mlp", mlp, None)]
for name, source, arch in cases:
    d = o.workdir()
    model_args = []
    if source is not None:
        model_args = ["--model", os.path.join(d, "src.keras")]
        source.save(model_args[1])
    ck, logs, dump = (os.path.join(d, n) for n in ("ck", "logs", "w.bin"))
    o.mwtrain("train", *model_args, "--epochs", "1", "--steps-per-epoch", "150",
              "--checkpoint-dir", ck, "--summary-dir", logs, "--dump-weights", dump,
              "--progress", "none", cwd=d)
    head, rows = o.read_csv(os.path.join(logs, "metrics.csv"))
    mw_loss, mw_acc = rows[-1][head.index("test/loss")], rows[-1][head.index("test/accuracy")]
    out = o.mwtrain("eval", "--checkpoint-dir", ck, cwd=d)
    printed = float(re.search(r"Test Accuracy: ([0-9.]+)", out).group(1))

    kpath, hpath = os.path.join(d, "out.keras"), os.path.join(d, "out.weights.h5")
    o.mwtrain("export", "--checkpoint-dir", ck, "--format", "keras", "--output", kpath, cwd=d)
    o.mwtrain("export", "--checkpoint-dir", ck, "--format", "weights-h5", "--output", hpath,
              cwd=d)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        k = keras.models.load_model(kpath)
    skipped = [str(w.message) for w in caught if "Skipping" in str(w.message)]
    o.check(not skipped, f"{name}: load_model loads every variable, the optimizer's too "
            f"{skipped[:1]}")
    got, ref = o.flat_weights(k), np.fromfile(dump, "<f4")
    o.check(got.size == ref.size and np.array_equal(got, ref),
            f"{name}: the .keras holds the trained weights bitwise ({got.size} values)")
    k_loss, k_acc = k.evaluate(x, y, batch_size=500, verbose=0)
    o.check(abs(mw_acc - k_acc) <= 1e-4 + 1e-9,
            f"{name}: test accuracy Keras {100 * k_acc:.2f} %, mwtrain {100 * mw_acc:.2f} % "
            f"(to 0.01 %)")
    o.check(abs(printed - 100 * k_acc) <= 0.01 + 0.005,
            f"{name}: `mwtrain eval` prints {printed:.2f}, Keras {100 * k_acc:.3f}")
    rel = abs(mw_loss - k_loss) / abs(k_loss)
    o.check(rel <= 1e-4, f"{name}: test loss Keras {k_loss:.9g}, mwtrain {mw_loss:.9g} "
            f"(relative {rel:.2e})")
    o.check(mw_acc > 0.5, f"{name}: training did something (accuracy {100 * mw_acc:.2f} %)")

    same = keras.models.model_from_json(source.to_json()) if source is not None else arch()
    same.load_weights(hpath)
    p_h5 = same.predict(x[:512], verbose=0)
    p_keras = k.predict(x[:512], verbose=0)
    o.check(np.array_equal(p_h5, p_keras),
            f"{name}: load_weights(.weights.h5) predicts as the .keras "
            f"(max difference {np.abs(p_h5 - p_keras).max():.3g})")
o.finish()
