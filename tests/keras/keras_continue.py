"""Training continues in Keras where mwtrain stopped: the optimizer's state goes out too.

A data set of one global batch (64 Fashion-MNIST images). mwtrain trains the tutorial CNN for
3 steps (Adam, then SGD with momentum; the flags' default hyperparameters, which export
writes), checkpointing; `export --format keras` of that checkpoint; Keras load_model() and
one train_on_batch on the same 64 images; mwtrain --resume for the same one step. The two
step-4 weights agree to within 1e-3 of the step's own size (max |difference| / max |step|),
while a fresh optimizer (what Keras would do without the exported slots) is checked to be
far off, so the test can tell them apart.
"""
import os

import keras
import numpy as np

import oracle as o

xb, yb, d, data = o.one_batch_data()
for opt in ("adam", "sgd"):
    run = o.workdir()
    ck, dump3, dump4 = (os.path.join(run, n) for n in ("ck", "w3.bin", "w4.bin"))
    common = ["--data-dir", data, "--batch-per-replica", "64", "--optimizer", opt,
              "--checkpoint-dir", ck, "--checkpoint-every-epochs", "1", "--summary-dir", "",
              "--progress", "none", "--threads", "1"]
    o.mwtrain("train", "--epochs", "3", "--dump-weights", dump3, *common, cwd=run)
    path = os.path.join(run, "m.keras")
    o.mwtrain("export", "--checkpoint-dir", ck, "--format", "keras", "--output", path, cwd=run)
    o.mwtrain("train", "--epochs", "4", "--resume", "--dump-weights", dump4, *common, cwd=run)
    w3, w4 = np.fromfile(dump3, "<f4"), np.fromfile(dump4, "<f4")
    k = keras.models.load_model(path)
    o.check(np.array_equal(o.flat_weights(k), w3), f"{opt}: the archive holds step 3's weights")
    o.check(int(k.optimizer.iterations.numpy()) == 3,
            f"{opt}: Keras' optimizer has done {int(k.optimizer.iterations.numpy())} steps (3)")
    k.train_on_batch(xb, yb)
    step = np.abs(w4 - w3).max()
    err = np.abs(o.flat_weights(k) - w4).max() / step
    o.check(err <= 1e-3, f"{opt}: step 4 in Keras and in mwtrain: max difference {err:.1e} of "
            f"the step's size {step:.2e}")
    fresh = keras.models.load_model(path)
    fresh.compile(optimizer=type(fresh.optimizer)(learning_rate=1e-3), loss=fresh.loss)
    fresh.train_on_batch(xb, yb)
    far = np.abs(o.flat_weights(fresh) - w4).max() / step
    o.check(far > 100 * err and far > 1e-2,
            f"{opt}: a fresh optimizer is far off ({far:.1e}): the slots are what matched")
o.finish()
