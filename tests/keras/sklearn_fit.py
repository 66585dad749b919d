"""Real data against Keras' fit (suite 'keras'): scikit-learn's bundled data sets.

tests/data/sklearn_npz.py turns load_breast_cancer, load_diabetes and load_digits into .npz
files (its docstring has the split and the scaling). For each data set a small Keras model is
compiled with Adam(1e-3), its loss and a metric, and saved as .keras: mwtrain takes the
model, its initial weights, loss, metric and optimizer from that archive. mwtrain trains it
under `mpirun -n 2` with --batch-per-replica B (global batch 2B) for E epochs, shuffled with
its own seeded order; Keras trains the same archive (keras.models.load_model: the same
initial weights, a fresh Adam) with fit(batch_size=2B, epochs=E, shuffle=True), then
evaluate() on the test set.

  breast_cancer  Dense(16, relu) -> Dense(1, sigmoid), BinaryCrossentropy, accuracy and AUC
  diabetes       Dense(32, relu) -> Dense(1), MeanSquaredError, mae
  digits         Conv2D(16, 3, relu) -> MaxPooling2D(2) -> Flatten -> Dense(10, softmax),
                 CategoricalCrossentropy(label_smoothing=0.1), accuracy (categorical)

The two shuffles differ, so the two runs cannot agree bit for bit: the comparison is the
final TEST metric and TEST loss, "within noise". The noise is measured: Keras trains
N_SEEDS = 5 times from the same weights with different shuffles (keras.utils.set_random_seed),
and its mean and sample standard deviation s are the reference. mwtrain passes when

    |mwtrain - mean| <= max(3 s, floor)

for both the metric and the loss. mwtrain's run is one more draw of the same distribution
(another shuffle), so its distance to the mean of 5 has a standard deviation of
s sqrt(1 + 1/5) = 1.1 s; 3 s alone would be a ~1 % false alarm, and s from 5 runs is itself
uncertain (relative standard error 1/sqrt(2 (n - 1)) = 35 %), hence the floors. They come from
the spread of 8 Keras seeds measured on this split (2 cores, AVX-512): the test losses and
MAE vary by 0.3 to 0.6 % (sd, relative), the accuracies by 0.36 to 0.4 points, so
  - accuracy: 2 points (5 sd; 3 of the 143 breast-cancer test examples, 9 of the 450 digits);
  - MAE (diabetes, in units of the target's std): 3 % relative (10 sd);
  - every loss: 3 % relative (6 sd);
  - AUC (breast cancer's second metric): 0.01 absolute (its sd over seeds is ~0.001).
The floors leave room for what a CPU's rounding adds (a few ulps per step, which training
amplifies into a different trajectory of the same distribution, as a shuffle does) without
hiding a real difference: the controls below show what the check resolves.
Two exact checks sit beside the statistical one, so that a wrong metric cannot hide in the
noise: mwtrain's initial weights are the archive's bit for bit (a one-process --epochs 0
--dump-weights), and Keras' evaluate() of mwtrain's FINAL weights (--dump-weights) equals
the test loss and metric mwtrain reports in metrics.csv (loss and MAE relative 1e-4: a mean
of 111 to 450 float32 per-example values after a forward pass of a few hundred products,
whose rounding is ~1e-6 relative; accuracy within 1 example, as an output within rounding of
0.5, or two logits within rounding of each other, could flip), and the epoch line names the
metric (Accuracy, MAE) and prints those values rounded. An AUC is bucket counts, exact, of
outputs that may each land on the other side of a bucket edge by rounding: one such output
moves it by at most 1 / (positives x negatives) of the test set, its tolerance.
Controls, showing the statistical check can fail: Keras trained with a tenth of the epochs,
and Keras trained with Adam at twice the learning rate (2e-3; measured: the test loss moves by
6 to 11 %), must each fall outside the tolerance, in the metric or the loss, on every data set.

usage: sklearn_fit.py MWTRAIN WORKDIR   (python with keras, jax, numpy, scikit-learn)"""
import os
import re
import shutil
import subprocess
import sys
import time
import warnings

os.environ.setdefault("KERAS_BACKEND", "jax")
warnings.filterwarnings("ignore")
import keras  # noqa: E402
import numpy as np  # noqa: E402
from oracle import check, finish, metrics_rows  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
CONVERT = os.path.join(HERE, "..", "data", "sklearn_npz.py")
N_SEEDS = 5
INIT_SEED = 1234


class Set:
    """A data set: its .npz name, the Keras model, the loss, the metric (compile's name and
    the metrics.csv key), epochs, batch per replica, and the floors of the tolerance (metric:
    absolute for accuracy, relative otherwise; loss: relative)."""

    def __init__(self, name, layers, loss, metric, epochs, bpr, metric_floor, loss_floor,
                 extra=()):
        self.name, self.layers, self.loss, self.metric = name, layers, loss, metric
        self.extra = list(extra)  # more metrics after the first (AUC), compared the same way
        self.epochs, self.bpr = epochs, bpr
        self.metric_floor, self.loss_floor = metric_floor, loss_floor
        self.relative = metric != "accuracy"


def sets():
    D, L = keras.layers, keras.losses
    return [
        Set("breast_cancer",
            lambda: [keras.Input((30,)), D.Dense(16, activation="relu"),
                     D.Dense(1, activation="sigmoid")],
            L.BinaryCrossentropy(), "accuracy", 30, 16, 0.02, 0.03, extra=["auc"]),
        Set("diabetes",
            lambda: [keras.Input((10,)), D.Dense(32, activation="relu"), D.Dense(1)],
            L.MeanSquaredError(), "mae", 60, 16, 0.03, 0.03),
        Set("digits",
            lambda: [keras.Input((8, 8, 1)), D.Conv2D(16, 3, activation="relu"),
                     D.MaxPooling2D(2), D.Flatten(), D.Dense(10, activation="softmax")],
            L.CategoricalCrossentropy(label_smoothing=0.1), "accuracy", 20, 16, 0.02, 0.03),
    ]


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True)


def mwtrain(mw, work, tag, s, *args, launcher=()):
    """One run of mwtrain; its stdout, or None after recording the failure."""
    cmd = [*launcher, mw, "train", "--model", os.path.join(work, s.name + ".keras"),
           "--data", os.path.join(work, s.name + ".npz"), "--batch-per-replica", str(s.bpr),
           "--threads", "1", "--summary-dir", os.path.join(work, tag + "-logs"),
           "--checkpoint-dir", os.path.join(work, tag + "-ck"), "--checkpoint-every-epochs",
           "0", "--progress", "none", *args]
    r = run(cmd)
    if r.returncode != 0:
        check(False, "%s: exit %d: %s" % (" ".join(cmd), r.returncode,
                                          (r.stdout + r.stderr)[-1500:]))
        return None
    return r.stdout


def last_row(work, tag):
    """The last epoch's row of metrics.csv: {column: float}."""
    rows = metrics_rows(os.path.join(work, tag + "-logs"))
    return rows[-1] if rows else {}


EPOCH = re.compile(r"Epoch (\d+), .*Test Loss: (\S+), Test (\w+): (\S+),")


def split_weights(flat, shapes):
    splits = np.cumsum([int(np.prod(s)) for s in shapes])[:-1]
    return [a.reshape(s) for a, s in zip(np.split(flat, splits), shapes)]


def keras_fit(s, path, data, seed, epochs, lr=None):
    """Keras from the archive (Adam at lr instead of 1e-3 when given): fit with a seeded
    shuffle, then evaluate; (loss, metric)."""
    m = keras.models.load_model(path)
    if lr is not None:
        m.compile(optimizer=keras.optimizers.Adam(lr), loss=s.loss,
                  metrics=[s.metric, *s.extra])
    keras.utils.set_random_seed(seed)
    m.fit(data["x_train"], data["y_train"], batch_size=2 * s.bpr, epochs=epochs, shuffle=True,
          verbose=0)
    ev = m.evaluate(data["x_test"], data["y_test"], batch_size=len(data["x_test"]), verbose=0,
                    return_dict=True)
    return (ev["loss"], ev[s.metric], *[ev[x] for x in s.extra])


AUC_FLOOR = 0.01


def within(got, mean, spread, floor, relative):
    """(ok, tolerance): |got - mean| <= max(3 spread, floor [x |mean| when relative])."""
    tol = max(3 * spread, floor * abs(mean) if relative else floor)
    return abs(got - mean) <= tol, tol


def one_set(mw, work, s, mpirun, table):
    t0 = time.time()
    path, npz = os.path.join(work, s.name + ".keras"), os.path.join(work, s.name + ".npz")
    data = dict(np.load(npz))
    keras.utils.set_random_seed(INIT_SEED)
    model = keras.Sequential(s.layers(), name=s.name)
    model.compile(optimizer=keras.optimizers.Adam(1e-3), loss=s.loss,
                  metrics=[s.metric, *s.extra])
    model.save(path)
    shapes = [tuple(w.shape) for w in model.weights]
    init = os.path.join(work, s.name + "-init.bin")
    if mwtrain(mw, work, s.name + "-init", s, "--epochs", "0", "--dump-weights", init) is None:
        return
    same = all(np.array_equal(a, np.asarray(w))
               for a, w in zip(split_weights(np.fromfile(init, "<f4"), shapes), model.weights))
    check(same, "%s: mwtrain's initial weights are the archive's" % s.name)

    final = os.path.join(work, s.name + "-final.bin")
    launcher = [mpirun, "--allow-run-as-root", "--oversubscribe", "-n", "2"]
    out = mwtrain(mw, work, s.name, s, "--epochs", str(s.epochs), "--dump-weights", final,
                  launcher=launcher)
    if out is None:
        return
    lines = [ln for ln in out.splitlines() if ln.startswith("Epoch ")]
    print("  mwtrain %s: %s" % (s.name, lines[-1] if lines else out.strip()[-300:]))
    row = last_row(work, s.name)
    key = "test/" + ("accuracy" if s.metric == "accuracy" else s.metric)
    if not check("test/loss" in row and key in row,
                 "%s: metrics.csv has test/loss and %s (%s)" % (s.name, key, sorted(row))):
        return
    mw_loss, mw_met = row["test/loss"], row[key]
    m = EPOCH.search(lines[-1] if lines else "")
    label, scale = ("Accuracy", 100.0) if s.metric == "accuracy" else ("MAE", 1.0)
    check(m is not None and m.group(1) == str(s.epochs) and m.group(3) == label and
          abs(float(m.group(2)) - mw_loss) <= 5.01e-5 and
          abs(float(m.group(4)) - scale * mw_met) <= (0.00501 if scale > 1 else 5.01e-5),
          "%s: the last epoch line shows Test Loss and Test %s of metrics.csv, rounded"
          % (s.name, label))
    check(int(row.get("epoch", s.epochs)) == s.epochs,
          "%s: metrics.csv's last row is epoch %s of %d" % (s.name, row.get("epoch"), s.epochs))

    # Keras' evaluate of mwtrain's final weights: the metric mwtrain reports is the real one
    m = keras.models.load_model(path)
    m.set_weights(split_weights(np.fromfile(final, "<f4"), shapes))
    ev = m.evaluate(data["x_test"], data["y_test"], batch_size=len(data["x_test"]), verbose=0,
                    return_dict=True)
    n_test = len(data["x_test"])
    lerr = abs(mw_loss - ev["loss"]) / max(abs(ev["loss"]), 1e-30)
    merr = abs(mw_met - ev[s.metric])
    mok = merr <= 1.0 / n_test + 1e-6 if not s.relative else \
        merr <= 1e-4 * max(abs(ev[s.metric]), 1e-30)
    check(lerr <= 1e-4 and mok,
          "%s: mwtrain's test loss %.6g and %s %.6g = Keras' evaluate of its final weights "
          "%.6g, %.6g" % (s.name, mw_loss, s.metric, mw_met, ev["loss"], ev[s.metric]))
    pos = float(np.sum(data["y_test"] != 0))
    pair = 1.0 / max(pos * (n_test - pos), 1.0)  # one output across a bucket edge
    mw_extra = [row.get("test/" + x, float("nan")) for x in s.extra]
    for x, v in zip(s.extra, mw_extra):
        check(abs(v - ev[x]) <= pair + 1e-6,
              "%s: mwtrain's test %s %.6g = Keras' evaluate of its final weights %.6g "
              "(within %.2g, one pair)" % (s.name, x, v, ev[x], pair))

    runs = np.array([keras_fit(s, path, data, 100 + i, s.epochs) for i in range(N_SEEDS)])
    mean, spread = runs.mean(0), runs.std(0, ddof=1)
    ok_m, tol_m = within(mw_met, mean[1], spread[1], s.metric_floor, s.relative)
    ok_l, tol_l = within(mw_loss, mean[0], spread[0], s.loss_floor, True)
    check(ok_m, "%s: test %s, mwtrain %.4f, Keras %.4f +- %.4f (%d seeds), |diff| %.4f <= %.4f"
          % (s.name, s.metric, mw_met, mean[1], spread[1], N_SEEDS, abs(mw_met - mean[1]),
             tol_m))
    check(ok_l, "%s: test loss, mwtrain %.4f, Keras %.4f +- %.4f (%d seeds), |diff| %.4f <= %.4f"
          % (s.name, mw_loss, mean[0], spread[0], N_SEEDS, abs(mw_loss - mean[0]), tol_l))
    extra_rows = []
    for j, (x, v) in enumerate(zip(s.extra, mw_extra)):
        ok_x, tol_x = within(v, mean[2 + j], spread[2 + j], AUC_FLOOR, False)
        check(ok_x, "%s: test %s, mwtrain %.4f, Keras %.4f +- %.4f (%d seeds), |diff| %.4f <= "
              "%.4f" % (s.name, x, v, mean[2 + j], spread[2 + j], N_SEEDS,
                        abs(v - mean[2 + j]), tol_x))
        extra_rows.append((s.name, x, s.epochs, 2 * s.bpr, v, mean[2 + j], spread[2 + j], tol_x,
                           ok_x, mw_loss, mean[0], spread[0], tol_l, ok_l))
    print("  keras runs (loss, %s): %s" % (", ".join([s.metric, *s.extra]), ", ".join(
        "(" + ", ".join("%.4f" % v for v in r) + ")" for r in runs)))

    # controls: an under-trained Keras, and one at twice the learning rate, are outside
    for what, epochs, lr in [("a tenth of the epochs", max(1, s.epochs // 10), None),
                             ("Adam(2e-3)", s.epochs, 2e-3)]:
        c_loss, c_met = keras_fit(s, path, data, 99, epochs, lr)[:2]
        c_out = not within(c_met, mean[1], spread[1], s.metric_floor, s.relative)[0] or \
            not within(c_loss, mean[0], spread[0], s.loss_floor, True)[0]
        check(c_out, "control: %s, Keras with %s (test loss %.4f, %s %.4f) is outside the "
              "tolerance" % (s.name, what, c_loss, s.metric, c_met))
    table.append((s.name, s.metric, s.epochs, 2 * s.bpr, mw_met, mean[1], spread[1], tol_m,
                  ok_m, mw_loss, mean[0], spread[0], tol_l, ok_l))
    table.extend(extra_rows)
    print("  %s: %.1f s" % (s.name, time.time() - t0), flush=True)


def main():
    mw, work = sys.argv[1], sys.argv[2]
    mpirun = shutil.which("mpirun")
    if not check(mpirun is not None, "mpirun is on the PATH"):
        return 1
    r = run([sys.executable, CONVERT, work])
    if not check(r.returncode == 0, "tests/data/sklearn_npz.py %s: %s"
                 % (work, (r.stdout + r.stderr).strip())):
        return 1
    table = []
    for s in sets():
        one_set(mw, work, s, mpirun, table)
    print("\n%-14s %-9s %6s %5s | %-8s %-17s %-8s %-4s | %-8s %-17s %-8s %s"
          % ("data set", "metric", "epochs", "batch", "mwtrain", "Keras mean+-sd", "tol", "",
             "loss mw", "Keras mean+-sd", "tol", ""))
    for (name, met, ep, gb, mm, km, ks, tm, okm, ml, kl, kls, tl, okl) in table:
        print("%-14s %-9s %6d %5d | %-8.4f %.4f +- %-7.4f %-8.4f %-4s | %-8.4f %.4f +- %-7.4f "
              "%-8.4f %s" % (name, met, ep, gb, mm, km, ks, tm, "ok" if okm else "FAIL",
                             ml, kl, kls, tl, "ok" if okl else "FAIL"))
    print("test metric and loss after the last epoch; Keras over %d shuffle seeds from the same "
          "weights; tol = max(3 sd, floor); see the top of tests/keras/sklearn_fit.py" % N_SEEDS)
    finish()  # exits 1 after failures
    return 0


if __name__ == "__main__":
    sys.exit(main())
