"""End-to-end parity of mwtrain's losses and metrics with real Keras (suite 'keras').

For each loss (and from_logits both ways, label smoothing, focal's class balancing, Huber's
delta) a small tabular model, Input((6,)) -> Dense(8, relu) -> Dense(K[, activation]), trained
by mwtrain and by Keras from the same initial weights on the same batches: 64 training
examples of a fixed numpy RNG in a Keras-style .npz, one epoch of 2 steps of SGD(0.1) with
batch 32, mwtrain with --no-shuffle and Keras' fit(shuffle=False). mwtrain's initial weights
are the ones it dumps with --epochs 0, loaded into Keras' model (for a .keras archive they are
the archive's, and must equal Keras' own bit for bit). The loss reaches mwtrain three ways:
a .keras archive saved after compile() (compile_config's loss, metrics in order and optimizer; at
least one case per metric: accuracy, MAE, MSE, RMSE), --loss NAME, and --loss-config (the
JSON of keras.losses.serialize) with --optimizer-config. Keras 3.6's Huber.get_config drops
delta (see loss_json), so Huber(delta=0.5) cannot travel in a .keras archive (Keras' own
load_model reads it back as delta 1.0, and so does mwtrain): the archive case is Huber's
default, and delta 0.5 goes through --loss-config with the key put back.

Keras' metric is the one mwtrain reports. Its "accuracy" resolves by shapes
(trainers/compile_utils.py, get_metric): BinaryAccuracy beside a width-1 output, which
thresholds y_pred at 0.5 even from logits (the logit cases hold logits in (0, 0.5], so a
threshold at 0 would show), CategoricalAccuracy beside a (N, 3) multi-hot target; mwtrain's
default beside a binary loss is the binary accuracy, so the multi-hot case compiles Keras with
"binary_accuracy".

Asserted per case:
  - the weights after 2 steps: per variable max|mwtrain - keras| / max|keras| <= 1e-4;
  - the epoch's train loss (metrics.csv, %.9g) against history["loss"], relative 1e-4, and
    the test loss after the epoch against Keras' evaluate(), relative 1e-4;
  - the train and test metric against Keras' (history / evaluate), the epoch line's name of it
    (Accuracy, MAE, MSE, RMSE) and the printed values within their rounding (accuracy %.2f
    percent, the others %.4f);
mwtrain refuses a loss whose from_logits contradicts the last layer's activation (exit
non-zero, a message naming the loss, the layer and from_logits); and for each loss (the first
case of each class, weighted or not) the weights after 2 steps are independent of the layout: `mpirun -n 2` with --batch-per-replica 16,
and --replicas-per-worker 2, against one process with batch 32, within 1e-5 relative (the
control: 2 ranks of 32, a global batch of 64, must differ by more).

Tolerances, from float32 rounding. A gradient entry is a sum of at most 32 (batch) x 8
(hidden width) products, each carrying a relative rounding of a few eps = 6e-8; XLA and
oneDNN sum in different orders, so an entry differs by at most ~32 x 8 x 6e-8 = 1.5e-5 of the
sum of its terms' magnitudes, in practice ~sqrt(256) x 6e-8 = 1e-6. The update is lr x g, and
measured against the largest entry of the variable (the biases start at 0, so for them the
relative error is the gradient's own), so two steps stay below ~1e-5; 1e-4 leaves a factor 10
for the exp/log/tanh of the two libraries (a few ulps each) and the second step's forward
pass on weights that already differ. The losses are means of 64 float32 values computed from
those weights, so the same bound holds. The layouts change nothing but the order in which the
float32 gradients of the two halves of the batch are added (no transcendental differs), hence
1e-5. A loss can flip a discrete event (an MAE residual or a Huber residual within rounding of
0 or delta, a ReLU input within rounding of 0); the fixed data keep every such input far from
its edge, which the error table shows (an event would be ~1e-2, not 1e-6).
Controls, showing the comparison can fail: Huber trained by Keras with delta 1.0 against
mwtrain's delta 0.5, and the focal loss without class balancing against mwtrain's with it,
must both differ by more than the tolerance.

usage: loss_e2e.py MWTRAIN WORKDIR"""
import json
import os
import re
import shutil
import subprocess
import sys
import warnings
import zipfile

os.environ.setdefault("KERAS_BACKEND", "jax")
warnings.filterwarnings("ignore")
import keras  # noqa: E402
import numpy as np  # noqa: E402
from oracle import check, finish, metrics_rows  # noqa: E402

L = keras.losses
N_TRAIN, N_TEST, F, HIDDEN, B, LR = 64, 32, 6, 8, 32, 0.1
TOL_W, TOL_LOSS, TOL_LAYOUT = 1e-4, 1e-4, 1e-5
# Keras' metrics per case (compile's metrics=[...]): the epoch line's name of each, its
# metrics.csv key in mwtrain, and its key in Keras' history
LABEL = {"accuracy": "Accuracy", "binary_accuracy": "Accuracy", "mae": "MAE", "mse": "MSE",
         "rmse": "RMSE", "auc": "AUC"}
MWKEY = {"accuracy": "accuracy", "binary_accuracy": "accuracy", "mae": "mae", "mse": "mse",
         "rmse": "rmse", "auc": "auc"}
KKEY = {"rmse": "root_mean_squared_error"}


class Case:
    """name; the loss object; K (the output width); targets: sparse | onehot | soft | binary |
    multihot | regress; the last activation; Keras' metric; how mwtrain gets the loss:
    keras (a .keras archive), name (--loss NAME, the string in .name) or config; weighted:
    sample weights in the .npz (sample_weight_train, sample_weight_test), Keras' fit and
    evaluate given the same."""

    def __init__(self, name, loss, k, targets, act, metric, via, loss_name=None, weighted=False):
        self.name, self.loss, self.k, self.targets, self.act = name, loss, k, targets, act
        self.metrics = metric if isinstance(metric, list) else [metric]
        self.via, self.loss_name, self.weighted = via, loss_name, weighted


def cases():
    return [
        Case("SparseCCE logits", L.SparseCategoricalCrossentropy(from_logits=True), 3,
             "sparse", None, "accuracy", "keras"),
        Case("SparseCCE softmax", L.SparseCategoricalCrossentropy(from_logits=False), 3,
             "sparse", "softmax", "accuracy", "config"),
        Case("CCE logits soft targets", L.CategoricalCrossentropy(from_logits=True), 3,
             "soft", None, "accuracy", "config"),
        Case("CCE softmax smoothing 0.1",
             L.CategoricalCrossentropy(from_logits=False, label_smoothing=0.1), 3, "onehot",
             "softmax", "accuracy", "config"),
        Case("BCE sigmoid (--loss)", L.BinaryCrossentropy(), 1, "binary", "sigmoid",
             "accuracy", "name", "binary_crossentropy"),
        Case("BCE logits smoothing 0.2",
             L.BinaryCrossentropy(from_logits=True, label_smoothing=0.2), 1, "binary", None,
             "accuracy", "config"),
        # Keras' "accuracy" beside a (N, 3) target is CategoricalAccuracy (compile_utils'
        # is_binary_or_sparse_categorical goes by shape); mwtrain's default beside a binary
        # loss is the binary accuracy, so Keras is compiled with that one.
        Case("BCE sigmoid multi-hot K=3", L.BinaryCrossentropy(from_logits=False), 3,
             "multihot", "sigmoid", "binary_accuracy", "config"),
        # Keras' "accuracy" beside multi-hot targets is CategoricalAccuracy (by the shapes,
        # compile_utils.get_metric), through the .keras archive's compile_config
        # and an AUC over every output of every example (multi_label=False flattens them)
        Case("BCE sigmoid multi-hot (.keras, accuracy, auc)", L.BinaryCrossentropy(), 3,
             "multihot", "sigmoid", ["accuracy", "auc"], "keras"),
        # AUC first, on logits as Keras' AUC() reads them (clipped to [0, 1]), unweighted
        # beside a weighted loss: Keras' compiled metrics take no sample_weight
        Case("BCE logits weighted (.keras, auc, accuracy)", L.BinaryCrossentropy(from_logits=True),
             1, "binary", None, ["auc", "accuracy"], "keras", weighted=True),
        Case("Focal sigmoid gamma 2", L.BinaryFocalCrossentropy(gamma=2.0), 1, "binary",
             "sigmoid", "accuracy", "config"),
        Case("Focal logits balanced smooth",
             L.BinaryFocalCrossentropy(apply_class_balancing=True, alpha=0.3, gamma=1.5,
                                       from_logits=True, label_smoothing=0.1), 1, "binary",
             None, "accuracy", "config"),
        Case("MSE K=2 (.keras, mse, mae, rmse)", "mse", 2, "regress", None,
             ["mse", "mae", "rmse"], "keras"),
        Case("MAE (--loss mae)", L.MeanAbsoluteError(), 1, "regress", None, "mae", "name",
             "mae"),
        Case("Huber (.keras, rmse)", L.Huber(), 2, "regress", None, "rmse", "keras"),
        Case("Huber delta 0.5", L.Huber(delta=0.5), 2, "regress", None, "mae", "config"),
        Case("LogCosh (.keras, mae)", L.LogCosh(), 1, "regress", None, "mae", "keras"),
        Case("MSE sample weights", L.MeanSquaredError(), 2, "regress", None, "mae", "config",
             weighted=True),
        Case("SparseCCE sample weights", L.SparseCategoricalCrossentropy(from_logits=True), 3,
             "sparse", None, "accuracy", "config", weighted=True),
        # ignore_class: a class of the model's (2 of 0..2), through the archive; and a label
        # above every class (255 on a quarter of the examples: no class of its own), with
        # sample weights. Keras divides by the batch's other examples; its accuracy still
        # counts the ignored ones (255 is never the argmax)
        Case("SparseCCE ignore_class 2 (.keras)",
             L.SparseCategoricalCrossentropy(from_logits=True, ignore_class=2), 3, "sparse",
             None, "accuracy", "keras"),
        Case("SparseCCE ignore_class 255 weighted",
             L.SparseCategoricalCrossentropy(from_logits=True, ignore_class=255), 3,
             "sparse255", None, "accuracy", "config", weighted=True),
    ]


def loss_json(loss):
    """keras.losses.serialize(loss), with the arguments Keras 3.6's get_config drops put back:
    Huber.get_config returns Loss.get_config(self) (keras/src/losses/losses.py), without delta,
    so Huber(delta=0.5) serializes, and saves in a .keras archive, as Huber(delta=1.0). The
    JSON must read back in Keras as the same loss."""
    cfg = L.serialize(loss)
    for k, v in getattr(loss, "_fn_kwargs", {}).items():
        cfg["config"].setdefault(k, v)
    back = L.deserialize(json.loads(json.dumps(cfg, default=float)))
    assert getattr(back, "_fn_kwargs", {}) == getattr(loss, "_fn_kwargs", {}), cfg
    return cfg


def keras_metric(m):
    return keras.metrics.RootMeanSquaredError() if m == "rmse" else m


def make_data(targets, k, seed):
    """(x_train, y_train, x_test, y_test) from a fixed RNG: features N(0, 1), targets from a
    random linear map of them plus noise (so the metrics are neither 0 nor 100 %)."""
    rng = np.random.default_rng(seed)
    n = N_TRAIN + N_TEST
    x = rng.standard_normal((n, F)).astype(np.float32)
    z = x @ rng.standard_normal((F, max(k, 1))) + 0.5 * rng.standard_normal((n, max(k, 1)))
    if targets in ("sparse", "sparse255"):
        y = np.argmax(z, 1).astype(np.int32)
        if targets == "sparse255":  # the ignore_class label on every fourth example
            y[::4] = 255
    elif targets == "onehot":
        y = np.eye(k, dtype=np.float32)[np.argmax(z, 1)]
    elif targets == "soft":
        e = np.exp(z - z.max(1, keepdims=True))
        y = (e / e.sum(1, keepdims=True)).astype(np.float32)
    elif targets in ("binary", "multihot"):
        y = (z > 0).astype(np.float32)
    else:
        y = (0.5 * z).astype(np.float32)
    if k == 1 and not targets.startswith("sparse"):
        y = y[:, 0]  # (N,) against a Dense(1) output
    return x[:N_TRAIN], y[:N_TRAIN], x[N_TRAIN:], y[N_TRAIN:]


def build(c, seed):
    keras.utils.set_random_seed(seed)
    return keras.Sequential([
        keras.Input((F,)), keras.layers.Dense(HIDDEN, activation="relu", name="hidden"),
        keras.layers.Dense(c.k, activation=c.act, name="head")])


def compiled(model, loss, metrics):
    model.compile(optimizer=keras.optimizers.SGD(LR), loss=loss,
                  metrics=[keras_metric(m) for m in metrics])
    return model


def rel_err(got, want):
    return max(float(np.max(np.abs(np.ravel(g) - np.ravel(w))) / max(np.max(np.abs(w)), 1e-30))
               for g, w in zip(got, want))


def rel(a, b):
    return abs(a - b) / max(abs(b), 1e-30)


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True)


def mwtrain(mw, work, tag, model, data, *args, launcher=(), bpr=B):
    """One run of mwtrain; its stdout, or None after recording the failure."""
    cmd = [*launcher, mw, "train", "--data", data, "--model", model, "--batch-per-replica",
           str(bpr), "--threads", "1", "--no-shuffle", "--test-examples", str(N_TEST),
           "--summary-dir", os.path.join(work, tag + "-logs"), "--checkpoint-every-epochs", "0",
           "--checkpoint-dir", os.path.join(work, tag + "-ck"), "--progress", "none", *args]
    r = run(cmd)
    if r.returncode != 0:
        check(False, "%s: exit %d: %s" % (" ".join(cmd), r.returncode, r.stderr[-800:]))
        return None
    return r.stdout


def csv_row(work, tag):
    """The first epoch's row of metrics.csv: {column: float}."""
    rows = metrics_rows(os.path.join(work, tag + "-logs"))
    return rows[0] if rows else {}


EPOCH = re.compile(r"Epoch 1, Loss: (\S+), (.*?), Test Loss: (\S+), (.*?), Time: ")


def epoch_line(stdout):
    """The epoch line's (train loss, [(label, value)], test loss, [(label, value)]), or None."""
    m = EPOCH.search(stdout)
    if m is None:
        return None
    pairs = [[tuple(p.split(": ")) for p in g.split(", ")] for g in (m.group(2), m.group(4))]
    train = [(a, float(b)) for a, b in pairs[0]]
    test = [(a[len("Test "):] if a.startswith("Test ") else "?" + a, float(b))
            for a, b in pairs[1]]
    return float(m.group(1)), train, float(m.group(3)), test


def split_weights(flat, shapes):
    splits = np.cumsum([int(np.prod(s)) for s in shapes])[:-1]
    return [a.reshape(s) for a, s in zip(np.split(flat, splits), shapes)]


def one_case(mw, work, i, c, rows):
    tag = "c%02d" % i
    x, y, xt, yt = make_data(c.targets, c.k, 1000 + i)
    data = os.path.join(work, tag + ".npz")
    sw = {}
    if c.weighted:  # a few zeros among them: those examples count for nothing
        rng = np.random.default_rng(3000 + i)
        sw = {"sample_weight_train": rng.choice([0.0, 0.5, 1.0, 2.5], N_TRAIN),
              "sample_weight_test": rng.uniform(0, 2, N_TEST).astype(np.float32)}
    np.savez(data, x_train=x, y_train=y, x_test=xt, y_test=yt, **sw)
    model = build(c, 2000 + i)
    shapes = [tuple(w.shape) for w in model.weights]
    args = []
    if c.via == "keras":
        path = os.path.join(work, tag + ".keras")
        compiled(model, c.loss, c.metrics).save(path)
    else:
        path = os.path.join(work, tag + ".json")
        with open(path, "w") as f:
            f.write(model.to_json())
        opt = os.path.join(work, tag + "-opt.json")
        with open(opt, "w") as f:
            json.dump(keras.optimizers.serialize(keras.optimizers.SGD(LR)), f, default=float)
        args += ["--optimizer-config", opt]
        if c.via == "name":
            args += ["--loss", c.loss_name]
        else:
            cfg = os.path.join(work, tag + "-loss.json")
            with open(cfg, "w") as f:
                json.dump(loss_json(c.loss), f, default=float)
            args += ["--loss-config", cfg]
    init = os.path.join(work, tag + "-init.bin")
    if mwtrain(mw, work, tag + "-init", path, data, "--epochs", "0", "--dump-weights", init,
               *args) is None:
        return None
    init_w = split_weights(np.fromfile(init, "<f4"), shapes)
    if c.via == "keras":
        same = all(np.array_equal(a, np.asarray(w)) for a, w in zip(init_w, model.weights))
        check(same, "%s: mwtrain's initial weights are the archive's" % c.name)
    out = os.path.join(work, tag + "-w.bin")
    stdout = mwtrain(mw, work, tag, path, data, "--epochs", "1", "--steps-per-epoch", "2",
                     "--dump-weights", out, *args)
    if stdout is None:
        return None
    got = split_weights(np.fromfile(out, "<f4"), shapes)

    def keras_run(loss, weights=None):
        m = compiled(build(c, 2000 + i), loss, c.metrics)
        m.set_weights(init_w)
        h = m.fit(x, y, batch_size=B, epochs=1, shuffle=False, verbose=0,
                  sample_weight=sw.get("sample_weight_train") if weights is None
                  else weights(y)).history
        ev = m.evaluate(xt, yt, batch_size=N_TEST, verbose=0, return_dict=True,
                        sample_weight=sw.get("sample_weight_test"))
        keys = [KKEY.get(n, n) for n in c.metrics]
        return (m.get_weights(), h["loss"][0], [h[k][0] for k in keys], ev["loss"],
                [ev[k] for k in keys])

    kw, kloss, kmets, ktloss, ktmets = keras_run(L.get(c.loss) if isinstance(c.loss, str)
                                                 else c.loss)
    werr = rel_err(got, kw)
    check(werr <= TOL_W, "%s: weights after 2 steps, relative error %.2e <= %g"
          % (c.name, werr, TOL_W))
    row = csv_row(work, tag)
    mloss, mtloss = row.get("train/loss", float("nan")), row.get("test/loss", float("nan"))
    lerr, tlerr = rel(mloss, kloss), rel(mtloss, ktloss)
    check(lerr <= TOL_LOSS, "%s: train loss %.9g = Keras' history loss %.9g (relative %.2e)"
          % (c.name, mloss, kloss, lerr))
    check(tlerr <= TOL_LOSS, "%s: test loss %.9g = Keras' evaluate %.9g (relative %.2e)"
          % (c.name, mtloss, ktloss, tlerr))
    # metrics.csv's metric columns, in compile_config's order
    mkeys = [k[len("train/"):] for k in row if k.startswith("train/") and k != "train/loss"]
    check(mkeys == [MWKEY[n] for n in c.metrics], "%s: metrics.csv's columns %s are Keras' "
          "metrics %s in their order" % (c.name, mkeys, c.metrics))
    merr = terr = 0.0
    for n, kmet, ktmet in zip(c.metrics, kmets, ktmets):
        mmet = row.get("train/" + MWKEY[n], float("nan"))
        mtmet = row.get("test/" + MWKEY[n], float("nan"))
        acc = LABEL[n] == "Accuracy"
        # accuracies are counts over 64 / 32 examples: exact in float32 and double. An AUC
        # is made of bucket counts (exact) and Keras' float32 sums over 199 trapezoids.
        e1 = abs(mmet - kmet) if acc else rel(mmet, kmet)
        e2 = abs(mtmet - ktmet) if acc else rel(mtmet, ktmet)
        merr, terr = max(merr, e1), max(terr, e2)
        mtol = 1e-6 if acc else TOL_LOSS
        check(e1 <= mtol and e2 <= mtol,
              "%s: metrics.csv %s %.9g (train), %.9g (test) = Keras' %s %.9g, %.9g"
              % (c.name, MWKEY[n], mmet, mtmet, n, kmet, ktmet))
    line = epoch_line(stdout)
    if check(line is not None, "%s: the epoch line parses: %s" % (c.name, stdout.strip()[-300:])):
        labs = [LABEL[n] for n in c.metrics]
        check([a for a, _ in line[1]] == labs and [a for a, _ in line[3]] == labs,
              "%s: the epoch line names the metrics %s in order (got %s, Test %s)"
              % (c.name, labs, line[1], line[3]))
        printed, want, halves = [line[0], line[2]], [kloss, ktloss], [5e-5, 5e-5]
        for j, n in enumerate(c.metrics):
            scale, half = (100.0, 0.005) if LABEL[n] == "Accuracy" else (1.0, 5e-5)
            for vals, kv in ((line[1], kmets), (line[3], ktmets)):
                if j < len(vals):
                    printed.append(vals[j][1])
                    want.append(scale * kv[j])
                    halves.append(half)
        ok = len(printed) == 2 + 2 * len(c.metrics) and all(
            abs(p - w) <= h + 1e-4 * abs(w) for p, w, h in zip(printed, want, halves))
        check(ok, "%s: the epoch line %s = Keras' %s rounded"
              % (c.name, printed, ["%.6g" % v for v in want]))
    rows.append("%-44s %-7s %-15s %.2e  %.2e  %.2e  %.2e  %.2e"
                % (c.name, c.via, ",".join(c.metrics), werr, lerr, tlerr, merr, terr))
    return dict(path=path, data=data, args=args, weights=got, shapes=shapes, keras_run=keras_run)


def controls(results):
    """A neighbouring loss in Keras must differ from mwtrain's by more than the tolerance; and
    ignore_class's divisor: the same examples masked by sample weights (0 for label 2), which
    Keras divides by the whole batch instead of its valid examples, must differ too."""
    r = results.get("SparseCCE ignore_class 2 (.keras)")
    if r is not None:
        kw = r["keras_run"](L.SparseCategoricalCrossentropy(from_logits=True),
                            weights=lambda y: (y != 2).astype(np.float32))[0]
        e = rel_err(r["weights"], kw)
        check(e > TOL_W, "control: ignore_class 2 against Keras' mask by sample weights "
              "(divided by the batch, not its valid examples) differs, %.2e > %g" % (e, TOL_W))
    for name, other in [("Huber delta 0.5", L.Huber(delta=1.0)),
                        ("Focal logits balanced smooth",
                         L.BinaryFocalCrossentropy(apply_class_balancing=False, alpha=0.3,
                                                   gamma=1.5, from_logits=True,
                                                   label_smoothing=0.1)),
                        ("SparseCCE ignore_class 2 (.keras)",
                         L.SparseCategoricalCrossentropy(from_logits=True))]:
        r = results.get(name)
        if r is None:
            continue
        kw = r["keras_run"](other)[0]
        e = rel_err(r["weights"], kw)
        check(e > TOL_W, "control: %s against Keras' %s differs, %.2e > %g"
              % (name, loss_json(other)["config"], e, TOL_W))


def one_per_loss(results, cases_by_name):
    """The first case (by name) of each loss class, weighted or not: what the layouts and the
    exports run, to keep the suite's time."""
    seen, out = set(), []
    for name, r in sorted(results.items()):
        c = cases_by_name[name]
        cls = {"mse": "MeanSquaredError"}.get(c.loss) if isinstance(c.loss, str) \
            else type(c.loss).__name__
        if (cls, c.weighted) not in seen:
            seen.add((cls, c.weighted))
            out.append((name, r))
    return out


def layouts(mw, work, results):
    """The same global batch 32 as 2 ranks or 2 replicas of 16, for each loss."""
    mpirun = shutil.which("mpirun")
    if not check(mpirun is not None, "layouts: mpirun is on the PATH"):
        return
    mpi = [mpirun, "--allow-run-as-root", "--oversubscribe", "-n", "2"]
    for i, (name, r) in enumerate(results):
        for tag, launcher, extra, bpr in [("mpi2", mpi, [], B // 2),
                                          ("rpw2", [], ["--replicas-per-worker", "2"], B // 2),
                                          ("control", mpi, [], B)]:
            if tag == "control" and i > 0:
                continue
            t = "lay%d-%s" % (i, tag)
            out = os.path.join(work, t + ".bin")
            if mwtrain(mw, work, t, r["path"], r["data"], "--epochs", "1", "--steps-per-epoch",
                       "2", "--dump-weights", out, *extra, *r["args"], launcher=launcher,
                       bpr=bpr) is None:
                continue
            e = rel_err(split_weights(np.fromfile(out, "<f4"), r["shapes"]), r["weights"])
            if tag == "control":
                check(e > TOL_LAYOUT, "layout control: %s, 2 ranks of %d (a global batch of %d) "
                      "differs from batch %d: %.2e > %g" % (name, bpr, 2 * bpr, B, e, TOL_LAYOUT))
                continue
            check(e <= TOL_LAYOUT, "layout: %s, %s (batch-per-replica %d) against 1 process "
                  "(batch %d): relative %.2e <= %g" % (name, tag, bpr, B, e, TOL_LAYOUT))


def resume_export(mw, work, results):
    """The loss travels with the checkpoint: a run of Huber(delta=0.5) stopped after epoch 1
    and resumed without --model or --loss-config (the model and its loss from the checkpoint;
    the optimizer's flags again, which a checkpoint checks)
    ends bitwise where the run that never stopped ends; `export --format keras` writes the
    loss into compile_config, and the archive Keras loads computes mwtrain's test loss."""
    r = results.get("Huber delta 0.5")
    if r is None:
        return
    common = ["--batch-per-replica", str(B), "--threads", "1", "--no-shuffle", "--test-examples",
              str(N_TEST), "--summary-dir", "", "--progress", "none", "--steps-per-epoch", "2",
              "--data", r["data"]]
    ck, straight, resumed = (os.path.join(work, n) for n in ("rs-ck", "rs-a.bin", "rs-b.bin"))
    a = r["args"]  # the optimizer is given again (a checkpoint names it, as always); the loss not
    opt = [x for i, x in enumerate(a) if "--loss-config" not in (x, a[i - 1] if i else "")]
    runs = [[mw, "train", "--model", r["path"], *r["args"], *common, "--epochs", "2",
             "--checkpoint-every-epochs", "0", "--checkpoint-dir", os.path.join(work, "rs-a"),
             "--dump-weights", straight],
            [mw, "train", "--model", r["path"], *r["args"], *common, "--epochs", "1",
             "--checkpoint-dir", ck],
            [mw, "train", "--resume", *opt, *common, "--epochs", "2", "--checkpoint-dir", ck,
             "--summary-dir", os.path.join(work, "rs-logs"), "--dump-weights", resumed]]
    for cmd in runs:
        p = run(cmd)
        if not check(p.returncode == 0, "resume: %s: exit %d%s" % (
                " ".join(cmd[1:3]), p.returncode, "\n" + p.stderr[-1200:] if p.returncode else "")):
            return
    a, b = np.fromfile(straight, "<f4"), np.fromfile(resumed, "<f4")
    check(a.size == b.size and np.array_equal(a, b), "resume: Huber(delta=0.5) resumed from "
          "the checkpoint's model and loss ends bitwise where 2 epochs straight end")
    out = os.path.join(work, "rs.keras")
    p = run([mw, "export", "--checkpoint-dir", ck, "--format", "keras", "--output", out])
    if not check(p.returncode == 0, "export: exit %d%s" % (p.returncode,
                                                           p.stderr[-400:] if p.returncode else "")):
        return
    cfg = json.loads(zipfile.ZipFile(out).read("config.json"))["compile_config"]
    loss = cfg["loss"]
    check(loss["class_name"] == "Huber" and loss["config"].get("delta") == 0.5,
          "export: compile_config.loss is Huber with delta 0.5: %s" % loss)
    m = keras.models.load_model(out)
    d = np.load(r["data"])
    got = m.evaluate(d["x_test"][:N_TEST], d["y_test"][:N_TEST], verbose=0, return_dict=True)
    want = metrics_rows(os.path.join(work, "rs-logs"))[-1]["test/loss"]
    check(abs(got["loss"] - want) <= TOL_LOSS * abs(want),
          "export: Keras' evaluate of the exported archive %.9g = mwtrain's test loss %.9g"
          % (got["loss"], want))



def exports(mw, work, results, cases_by_name):
    """Each loss goes back to Keras: one step with a checkpoint, `export --format
    keras`, and keras.models.load_model compiles the archive with the loss's own class and
    arguments (Keras' constructor refuses an argument it lacks, such as axis beside the sparse
    loss) and the metrics in their order, which Keras' evaluate reports."""
    for i, (name, r) in enumerate(results):
        ck, out = os.path.join(work, "ex%d-ck" % i), os.path.join(work, "ex%d.keras" % i)
        p = run([mw, "train", "--model", r["path"], "--data", r["data"], *r["args"],
                 "--epochs", "1", "--steps-per-epoch", "1", "--summary-dir", "", "--progress",
                 "none", "--checkpoint-dir", ck])
        if p.returncode == 0:
            p = run([mw, "export", "--checkpoint-dir", ck, "--format", "keras", "--output", out])
        if not check(p.returncode == 0, "export %s: exit %d%s" % (
                name, p.returncode, "\n" + p.stderr[-600:] if p.returncode else "")):
            continue
        c = cases_by_name[name]
        try:
            model = keras.models.load_model(out)
            got = model.loss
            d = np.load(r["data"])
            ev = model.evaluate(d["x_test"], d["y_test"], verbose=0, return_dict=True)
            err = ""
        except Exception as e:  # noqa: BLE001 (the test reports what Keras said)
            got, ev, err = None, {}, str(e)
        # the metrics, in their order, under the names Keras reports them by
        written = json.loads(zipfile.ZipFile(out).read("config.json"))["compile_config"]
        want_m = [KKEY.get(n, n) for n in c.metrics]
        check(written.get("metrics") == want_m and sorted(ev) == sorted(["loss", *want_m]),
              "export %s: compile_config.metrics %s = %s, and Keras evaluates them (%s)"
              % (name, written.get("metrics"), want_m, sorted(ev)))
        want = {"mse": L.MeanSquaredError()}[c.loss] if isinstance(c.loss, str) else c.loss
        same = got is not None and type(got) is type(want) and \
            getattr(got, "_fn_kwargs", {}) == getattr(want, "_fn_kwargs", {})
        check(same, "export %s: Keras loads the archive compiled with %s %s%s"
              % (name, type(want).__name__, getattr(want, "_fn_kwargs", {}), err and ": " + err))


def refusals(mw, work):
    """A loss whose from_logits contradicts the last activation, or a probability loss after
    the wrong activation, is refused: exit non-zero, a message naming the loss and the layer
    ('head'), and from_logits where that is the contradiction."""
    for i, (loss, k, targets, act, word) in enumerate([
            (L.BinaryCrossentropy(from_logits=True), 1, "binary", "sigmoid", "from_logits"),
            (L.BinaryFocalCrossentropy(from_logits=False), 1, "binary", None, "from_logits"),
            (L.CategoricalCrossentropy(from_logits=True), 3, "onehot", "softmax", "from_logits"),
            (L.SparseCategoricalCrossentropy(from_logits=False), 3, "sparse", None,
             "from_logits"),
            (L.BinaryCrossentropy(from_logits=False), 3, "multihot", "softmax", "sigmoid")]):
        tag = "refuse%d" % i
        x, y, xt, yt = make_data(targets, k, 7)
        data = os.path.join(work, tag + ".npz")
        np.savez(data, x_train=x, y_train=y, x_test=xt, y_test=yt)
        path = os.path.join(work, tag + ".json")
        with open(path, "w") as f:
            f.write(build(Case(tag, loss, k, targets, act, None, "config"), 5).to_json())
        cfg = os.path.join(work, tag + "-loss.json")
        with open(cfg, "w") as f:
            json.dump(loss_json(loss), f, default=float)
        cmd = [mw, "train", "--data", data, "--model", path, "--loss-config", cfg, "--epochs",
               "1", "--steps-per-epoch", "1", "--batch-per-replica", str(B), "--threads", "1",
               "--summary-dir", "", "--checkpoint-dir", os.path.join(work, tag + "-ck"),
               "--progress", "none"]
        r = run(cmd)
        lines = (r.stdout + r.stderr).strip().splitlines()
        msg = lines[-1] if lines else ""
        cls = loss.__class__.__name__
        check(r.returncode != 0 and cls in msg and "head" in msg and word in msg,
              "%s(from_logits=%s) on Dense(activation=%s) is refused (exit %d) naming the "
              "loss, the layer 'head' and %s: %s"
              % (cls, loss.get_config()["from_logits"], act, r.returncode, word, msg))


def main():
    mw, work = sys.argv[1], sys.argv[2]
    rows, results = [], {}
    all_cases = cases()
    for i, c in enumerate(all_cases):
        r = one_case(mw, work, i, c, rows)
        if r is not None:
            results[c.name] = r
    controls(results)
    by_name = {c.name: c for c in all_cases}
    layouts(mw, work, one_per_loss(results, by_name))
    resume_export(mw, work, results)
    exports(mw, work, one_per_loss(results, by_name), by_name)
    refusals(mw, work)
    print("%-44s %-7s %-15s %-9s %-9s %-9s %-9s %s"
          % ("case (2 SGD steps vs Keras)", "via", "metric", "weights", "loss", "test loss",
             "metric", "test metric"))
    print("\n".join(rows))
    print("relative error allowed: weights %g, losses %g, metrics %g (accuracies 1e-6 "
          "absolute), layouts %g; see the top of tests/keras/loss_e2e.py" %
          (TOL_W, TOL_LOSS, TOL_LOSS, TOL_LAYOUT))
    finish()  # exits 1 after failures
    return 0


if __name__ == "__main__":
    sys.exit(main())
