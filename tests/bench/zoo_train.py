"""Real training of a keras.applications model, mwtrain under mpirun against Keras' fit from the
same archive: does a deep zoo model learn as well in mwtrain as in Keras, not only take the same
first step (tests/keras/zoo/zoo.py)?

The task: Fashion-MNIST (the machine's /usr/share/datasets/fashion-mnist) shaped as CIFAR-10 is,
each 28 x 28 image padded to 32 x 32 with zeros and repeated on 3 channels, float32 in [0, 1];
the first IMAGES training images, the whole 10,000-image test set. The model:
keras.applications.NAME(weights=None, classes=10, input_shape=(32, 32, 3)) compiled with
Adam(1e-3) and sparse categorical cross-entropy, saved once; both sides train that archive.

    zoo_train.py MWTRAIN WORKDIR NAME [--images N] [--epochs E] [--seeds S] [--ranks R]
                 [--mw-seeds S] [--keras-python PY --keras-backend jax|tensorflow]

mwtrain: `mpirun -n R mwtrain train`, batches of 32 per replica (a global batch of 32 R), each
epoch shuffled (its default, as Keras'), then `mwtrain eval` of the last checkpoint on the
whole test set. Keras: load_model of the same archive, fit with batch_size 32 R, shuffle=True,
once per seed (1 .. S: keras.utils.set_random_seed, which sets the batch order), then evaluate
on the whole test set; run by PY (default: this interpreter) so that the TensorFlow backend's
venv can do it.

What is compared, and why it is a tolerance and not a digit: after thousands of steps two
trainings of a deep network are the same training, not the same numbers (another batch order
moves the final accuracy as much as any rounding does). So the figure is mwtrain's final test
accuracy against the mean of Keras' seeds, with the spread of those seeds printed beside it; it
passes within TOL_POINTS = 1.5 points. With --mw-seeds S mwtrain trains S times too (--seed 1
.. S, the batch order, as Keras' seeds set it) and the means are compared: one mwtrain run
against a mean carries all of one training's spread. One difference is structural and stated: BatchNormalization
in mwtrain's replicas normalizes each replica's 32 examples (MirroredStrategy's default, not
SyncBatchNormalization), Keras' fit the global batch of 32 R; --sync-bn removes that difference
(synchronized=True in mwtrain's archive: its replicas normalize the global batch)."""
import argparse
import gzip
import json
import os
import statistics
import subprocess
import sys
import time

os.environ.setdefault("KERAS_BACKEND", "jax")
import numpy as np  # noqa: E402

DATA = "/usr/share/datasets/fashion-mnist"
TOL_POINTS = 1.5
B = 32


def idx(name):
    with gzip.open(os.path.join(DATA, name)) as f:
        b = f.read()
    dims = b[3]
    shape = [int.from_bytes(b[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(b, np.uint8, offset=4 + 4 * dims).reshape(shape)


def cifar_shaped(images):
    x = np.pad(images, ((0, 0), (2, 2), (2, 2))).astype(np.float32) / 255.0
    return np.repeat(x[..., None], 3, axis=3)


def make_data(path, n):
    np.savez(path, x_train=cifar_shaped(idx("train-images-idx3-ubyte.gz")[:n]),
             y_train=idx("train-labels-idx1-ubyte.gz")[:n].astype(np.int32),
             x_test=cifar_shaped(idx("t10k-images-idx3-ubyte.gz")),
             y_test=idx("t10k-labels-idx1-ubyte.gz").astype(np.int32))


def make_archive(path, name, bn_momentum=None, sync_bn=False):
    import keras
    keras.utils.set_random_seed(0)
    model = getattr(keras.applications, name)(weights=None, classes=10, input_shape=(32, 32, 3))
    for layer in model.layers:  # the same weights either way
        if isinstance(layer, keras.layers.BatchNormalization) and bn_momentum is not None:
            layer.momentum = bn_momentum  # the moving statistics' momentum
        if isinstance(layer, keras.layers.BatchNormalization) and sync_bn:
            layer.synchronized = True  # mwtrain: statistics over the global batch
    model.compile(optimizer=keras.optimizers.Adam(1e-3),
                  loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    model.save(path)
    return model.count_params()


KERAS_FIT = r"""
import json, os, sys, time
import numpy as np
import keras
archive, data, seed, epochs, batch = sys.argv[1:6]
d = np.load(data)
keras.utils.set_random_seed(int(seed))
m = keras.models.load_model(archive)
ends = [time.time()]
tick = keras.callbacks.LambdaCallback(on_epoch_end=lambda e, logs: ends.append(time.time()))
h = m.fit(d["x_train"], d["y_train"], batch_size=int(batch), epochs=int(epochs), shuffle=True,
          verbose=0, callbacks=[tick])
ev = m.evaluate(d["x_test"], d["y_test"], batch_size=256, verbose=0, return_dict=True)
print(json.dumps(dict(loss=h.history["loss"], accuracy=h.history["accuracy"],
                      test_loss=ev["loss"], test_accuracy=ev["accuracy"],
                      epoch_s=[b - a for a, b in zip(ends, ends[1:])],
                      backend=keras.backend.backend())))
"""


def cached(path, run):
    """The result of run() kept in path (JSON): a table of long trainings can be made over
    several sittings, each run done once."""
    if os.path.exists(path):
        with open(path) as f:
            return json.load(f)
    result = run()
    with open(path + ".tmp", "w") as f:
        json.dump(result, f)
    os.replace(path + ".tmp", path)
    return result


def keras_fit(py, backend, archive, data, seed, epochs, batch):
    r = subprocess.run([py, "-c", KERAS_FIT, archive, data, str(seed), str(epochs), str(batch)],
                       capture_output=True, text=True, env=dict(os.environ, KERAS_BACKEND=backend))
    if r.returncode:
        sys.exit("Keras' fit (seed %d) failed:\n%s" % (seed, r.stderr[-2000:]))
    return json.loads(r.stdout.strip().splitlines()[-1])


def mwtrain_fit(mw, work, tag, archive, data, epochs, ranks, seed=None):
    ck, logs = os.path.join(work, tag + "-ck"), os.path.join(work, tag + "-logs")
    subprocess.run(["rm", "-rf", ck, logs])
    cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-n", str(ranks), "-x",
           "OMP_WAIT_POLICY", mw, "train", "--data", data, "--model", archive,
           "--batch-per-replica", str(B), "--epochs", str(epochs), "--threads", "1",
           "--test-examples", "1000", "--checkpoint-dir", ck, "--summary-dir", logs,
           "--checkpoint-every-epochs", "1", "--progress", "none"]
    if seed is not None:  # the batch order (the weights are the archive's)
        cmd += ["--seed", str(seed)]
    env = dict(os.environ, OMP_WAIT_POLICY="passive")
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    print(r.stdout, end="", flush=True)
    if r.returncode:
        sys.exit("mwtrain train failed (exit %d):\n%s" % (r.returncode, r.stderr[-2000:]))
    epochs_out = [ln for ln in r.stdout.splitlines() if ln.startswith("Epoch ")]
    ev = subprocess.run([mw, "eval", "--data", data, "--checkpoint-dir", ck, "--threads", "2"],
                        capture_output=True, text=True)
    if ev.returncode:
        sys.exit("mwtrain eval failed (exit %d):\n%s" % (ev.returncode, ev.stderr[-2000:]))
    lines = [ln for ln in ev.stdout.splitlines() if ln.startswith("Accuracy after restoring")]
    if not lines:
        sys.exit("mwtrain eval printed no accuracy:\n%s" % ev.stdout[-1000:])
    acc = float(lines[-1].rsplit(":", 1)[1]) / 100  # printed in percent, as the tutorial does
    return dict(test_accuracy=acc, epochs=epochs_out,
                epoch_s=[float(ln.split("Time: ")[1].split(" s")[0]) for ln in epochs_out])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mwtrain")
    ap.add_argument("work")
    ap.add_argument("name")
    ap.add_argument("--images", type=int, default=10000)
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--keras-python", default=sys.executable)
    ap.add_argument("--keras-backend", default="jax", help="jax (this venv) or tensorflow")
    ap.add_argument("--bn-momentum", type=float,
                    help="every BatchNormalization's momentum set to this in the archive")
    ap.add_argument("--mw-seeds", type=int, default=0,
                    help="mwtrain too over seeds 1 .. S (--seed: the batch order), compared "
                         "mean to mean; 0: one run with mwtrain's default seed")
    ap.add_argument("--sync-bn", action="store_true",
                    help="every BatchNormalization synchronized=True in mwtrain's archive: its "
                         "replicas normalize the global batch, as Keras' fit on one device does "
                         "(Keras ignores the flag there, so its results are the archive's "
                         "without it and are shared)")
    ap.add_argument("--keras-recorded", default="",
                    help="SEED=ACCURACY,...: Keras seeds already trained in an earlier sitting "
                         "whose results were not kept in WORKDIR (each Keras-TF seed of "
                         "ResNet50V2 is 80 minutes on 2 cores): taken into the mean as given "
                         "and printed as recorded; the other seeds of 1 .. S are trained")
    ap.add_argument("--skip-keras", action="store_true", help="mwtrain's side only")
    ap.add_argument("--skip-mwtrain", action="store_true", help="Keras' side only")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    data = os.path.join(a.work, "data-%d.npz" % a.images)
    model = a.name + ("" if a.bn_momentum is None else "-bn%g" % a.bn_momentum)
    keras_tag = "%s-%dimg-%dep-b%d" % (model, a.images, a.epochs, B * a.ranks)
    model += "-syncbn" if a.sync_bn else ""
    archive = os.path.join(a.work, model + ".keras")
    if not os.path.exists(data):
        make_data(data, a.images)
    if not os.path.exists(archive):
        print("%s: %d parameters" % (model, make_archive(archive, a.name, a.bn_momentum,
                                                         a.sync_bn)), flush=True)
    batch = B * a.ranks
    tag = "%s-%dimg-%dep-b%d" % (model, a.images, a.epochs, batch)
    print("%s on %d padded Fashion-MNIST images, %d epochs, global batch %d" %
          (a.name, a.images, a.epochs, batch), flush=True)
    mw, mw_accs = None, []
    for seed in range(1, a.mw_seeds + 1) if not a.skip_mwtrain else ():
        t = "%s-seed%d" % (tag, seed)
        r = cached(os.path.join(a.work, t + "-mwtrain-n%d.json" % a.ranks),
                   lambda: mwtrain_fit(a.mwtrain, a.work, t, archive, data, a.epochs, a.ranks,
                                       seed))
        mw_accs.append(r["test_accuracy"])
        print("mwtrain (mpirun -n %d) seed %d: test accuracy %.4f, median epoch %.0f s" %
              (a.ranks, seed, r["test_accuracy"], statistics.median(r["epoch_s"])), flush=True)
    if mw_accs:
        print("mwtrain: mean %.4f, sd %.4f, range %.4f .. %.4f (%d seeds)" %
              (statistics.mean(mw_accs), statistics.stdev(mw_accs) if len(mw_accs) > 1 else 0,
               min(mw_accs), max(mw_accs), len(mw_accs)), flush=True)
        mw = dict(test_accuracy=statistics.mean(mw_accs))
    if not a.skip_mwtrain and not mw_accs:
        mw = cached(os.path.join(a.work, tag + "-mwtrain-n%d.json" % a.ranks),
                    lambda: mwtrain_fit(a.mwtrain, a.work, tag, archive, data, a.epochs, a.ranks))
        print("\n".join(mw["epochs"]))
        print("mwtrain (mpirun -n %d): test accuracy %.4f, median epoch %.0f s" %
              (a.ranks, mw["test_accuracy"], statistics.median(mw["epoch_s"])), flush=True)
    accs = []
    recorded = {int(k): float(v) for k, v in
                (item.split("=") for item in a.keras_recorded.split(",") if item)}
    if not a.skip_keras:
        for seed in range(1, a.seeds + 1):
            if seed in recorded:
                accs.append(recorded[seed])
                print("keras (%s) seed %d: test accuracy %.4f (recorded in an earlier sitting, "
                      "--keras-recorded)" % (a.keras_backend, seed, recorded[seed]), flush=True)
                continue
            k = cached(os.path.join(a.work, keras_tag + "-keras-seed%d.json" % seed),
                       lambda: keras_fit(a.keras_python, a.keras_backend, archive, data, seed,
                                         a.epochs, batch))
            accs.append(k["test_accuracy"])
            print("keras (%s) seed %d: test accuracy %.4f, train loss by epoch %s, median epoch "
                  "%.0f s" % (k["backend"], seed, k["test_accuracy"],
                              " ".join("%.3f" % v for v in k["loss"]),
                              statistics.median(k["epoch_s"])), flush=True)
        sd = statistics.stdev(accs) if len(accs) > 1 else 0.0
        print("keras: mean %.4f, sd %.4f, range %.4f .. %.4f (%d seeds)" %
              (statistics.mean(accs), sd, min(accs), max(accs), len(accs)), flush=True)
    if mw is not None and accs:
        gap = 100 * (mw["test_accuracy"] - statistics.mean(accs))
        ok = abs(gap) <= TOL_POINTS
        print("%s  %s: mwtrain %.2f %% vs Keras %.2f %% (means): %+.2f points (limit %.1f)" %
              ("ok  " if ok else "FAIL", a.name, 100 * mw["test_accuracy"],
               100 * statistics.mean(accs), gap, TOL_POINTS), flush=True)
        return 0 if ok else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
