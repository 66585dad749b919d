"""Loss and gradients of one batch, mwtrain against Keras, from the same .keras archive.

A data set of exactly one global batch (64 training images of Fashion-MNIST), so the step's
gradient is the mean over those images whatever the shuffle. Keras (JAX) computes the loss
and the gradient of every variable at the archive's weights (training=False: the models have
no Dropout). mwtrain loads the archive and takes one SGD step with momentum 0 and a learning
rate of 1000, so the gradient is (w0 - w1) / 1000 with w1 dominated by the step; the step's
loss is metrics.csv's train/loss. Both must agree within 1e-4 relative: the loss, and each
variable's gradient (max |difference| / max |Keras gradient| over the variable). Two
layouts: 1 rank, and 2 ranks x 32 images (the all-reduced gradient).
"""
import os
import subprocess

import jax
import keras
import numpy as np

import oracle as o

LR = 1000.0
xb, yb, d, data = o.one_batch_data()
worst = {}
for name, build in [("tutorial_cnn", o.tutorial_cnn), ("mlp", lambda: o.mlp(dropout=0))]:
    keras.utils.set_random_seed(3)
    model = o.compile_like_mwtrain(build())
    path = os.path.join(d, f"{name}.keras")
    model.save(path)
    softmax_out = model.layers[-1].get_config().get("activation") == "softmax"
    tv = [v.value for v in model.trainable_variables]
    ntv = [v.value for v in model.non_trainable_variables]

    def loss_fn(tv_):
        pred, _ = model.stateless_call(tv_, ntv, xb, training=False)
        return keras.losses.sparse_categorical_crossentropy(
            yb, pred, from_logits=not softmax_out).mean()

    k_loss, k_grads = jax.value_and_grad(loss_fn)(tv)
    k_loss, k_grads = float(k_loss), [np.asarray(g) for g in k_grads]
    w0 = o.flat_weights(model)
    for ranks in (1, 2):
        run = o.workdir()
        dump, logs = os.path.join(run, "w1.bin"), os.path.join(run, "logs")
        args = [o.MWTRAIN, "train", "--model", path, "--data-dir", data, "--epochs", "1",
                "--batch-per-replica", str(64 // ranks), "--optimizer", "sgd", "--momentum", "0",
                "--learning-rate", str(LR), "--dump-weights", dump, "--summary-dir", logs,
                "--checkpoint-every-epochs", "0", "--checkpoint-dir", os.path.join(run, "ck"),
                "--progress", "none", "--threads", "1"]
        if ranks > 1:
            args = ["mpirun", "-n", str(ranks), "--oversubscribe"] + args
        p = subprocess.run(args, cwd=run, capture_output=True, text=True)
        if p.returncode != 0:
            o.check(False, f"{name} x{ranks}: mwtrain exit {p.returncode}: {p.stderr[-500:]}")
            continue
        w1 = np.fromfile(dump, "<f4")
        g = (w0.astype(np.float64) - w1.astype(np.float64)) / LR
        head, rows = o.read_csv(os.path.join(logs, "metrics.csv"))
        mw_loss = rows[0][head.index("train/loss")]
        rel = abs(mw_loss - k_loss) / abs(k_loss)
        o.check(rel <= 1e-4, f"{name} x{ranks}: loss mwtrain {mw_loss:.9g}, Keras {k_loss:.9g} "
                f"(relative {rel:.1e})")
        off, bad = 0, 0.0
        for v, kg in zip(model.trainable_variables, k_grads):
            mg = g[off:off + kg.size].reshape(kg.shape)
            off += kg.size
            err = np.abs(mg - kg).max() / np.abs(kg).max()
            bad = max(bad, err)
            o.check(err <= 1e-4, f"{name} x{ranks}: gradient of {v.path} {kg.shape}: "
                    f"relative error {err:.1e}")
        worst[(name, ranks)] = (model.count_params(), rel, bad)
print("parity (model, ranks, parameters, loss relative error, worst gradient relative error):")
for (name, ranks), (n, rel, bad) in worst.items():
    print(f"  {name:13s} x{ranks}  {n:7d}  {rel:.1e}  {bad:.1e}")
o.finish()
