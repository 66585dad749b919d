"""Synchronized BatchNormalization against real Keras: 4 replicas that synchronize train like
one device that sees the whole global batch.

Keras builds the model of gen_syncbn_model.py (three BatchNormalization layers, one over a flat
(batch, 32) tensor) and saves it with its initial weights; the archive's config is patched to
synchronized: true (Keras builds that flag only on its TensorFlow backend; this is JAX). mwtrain
trains the archive for 2 steps of a global batch of 64 split over 1 rank x 4 replicas (16
examples each), --no-shuffle, SGD(0.1) from keras.optimizers.serialize; Keras fits the same
two batches on one device. mwtrain's weights, exported as .weights.h5 and loaded into the Keras
model, match Keras' (moving mean and variance included) within 1e-4 relative per variable.
The control: the same archive unsynchronized (each replica normalizes by its own 16 examples)
is more than 1e-3 away, so the comparison tells the two apart.
"""
import json
import os
import zipfile

import keras
import numpy as np

import gen_syncbn_model
import oracle as o

B, STEPS, REPLICAS, TOL = 64, 2, 4, 1e-4


def set_synchronized(src, dst, flag):
    with zipfile.ZipFile(src) as z:
        files = {n: z.read(n) for n in z.namelist()}
    cfg = json.loads(files["config.json"])
    for layer in cfg["config"]["layers"]:
        if layer["class_name"] == "BatchNormalization":
            layer["config"]["synchronized"] = flag
    files["config.json"] = json.dumps(cfg).encode()
    with zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as z:
        for n, b in files.items():
            z.writestr(n, b)


def rel_err(got, want):
    """Worst variable's max |got - want| / max |want|, and its name."""
    errs = [(float(np.max(np.abs(np.asarray(g) - np.asarray(w))) / np.max(np.abs(w))), v.path)
            for g, w, v in zip(got, want, keras_model.weights)]
    return max(errs)


x_all, y_all = o.test_set()
x, y = x_all[:B * STEPS], y_all[:B * STEPS]
d = o.workdir()
data = os.path.join(d, "data")
raw = np.round(x[..., 0] * 255).astype(np.uint8)
o.write_idx_dir(data, raw, y, raw[:B], y[:B])

keras.utils.set_random_seed(7)
keras_model = gen_syncbn_model.build()
opt = keras.optimizers.SGD(0.1)
keras_model.compile(optimizer=opt,
                    loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
plain = os.path.join(d, "plain.keras")
keras_model.save(plain)
opt_cfg = os.path.join(d, "sgd.json")
with open(opt_cfg, "w") as f:
    json.dump(keras.optimizers.serialize(opt), f, default=float)
keras_model.fit(x, y, batch_size=B, epochs=1, shuffle=False, verbose=0)
want = [np.asarray(w) for w in keras_model.weights]

for flag in (True, False):
    run = o.workdir()
    archive = os.path.join(run, "m.keras")
    set_synchronized(plain, archive, flag)
    ck, out = os.path.join(run, "ck"), os.path.join(run, "m.weights.h5")
    o.mwtrain("train", "--model", archive, "--data-dir", data, "--no-shuffle",
              "--batch-per-replica", str(B // REPLICAS), "--replicas-per-worker", str(REPLICAS),
              "--epochs", "1", "--steps-per-epoch", str(STEPS), "--optimizer-config", opt_cfg,
              "--test-examples", str(B), "--threads", "1", "--checkpoint-dir", ck,
              "--summary-dir", "", "--progress", "none", cwd=run)
    o.mwtrain("export", "--checkpoint-dir", ck, "--format", "weights-h5", "--output", out,
              cwd=run)
    m = gen_syncbn_model.build()
    m.load_weights(out)
    err, where = rel_err([np.asarray(w) for w in m.weights], want)
    if flag:
        o.check(err <= TOL, f"synchronized, {REPLICAS} replicas vs Keras on one device, "
                f"{STEPS} SGD steps: worst relative error {err:.2e} ({where}) <= {TOL:g}")
    else:
        o.check(err > 1e-3, f"control: unsynchronized, {REPLICAS} replicas of {B // REPLICAS}: "
                f"{err:.2e} ({where}) > 1e-3 from Keras")
o.finish()
