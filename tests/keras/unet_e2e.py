"""A segmentation model against real Keras: a small U-Net on Fashion-MNIST made a per-pixel
task (the machine's /usr/share/datasets/fashion-mnist).

The task: each 28 x 28 image padded to 32 x 32 with zeros, each pixel labelled 0 (background:
below THRESH of 255) or 1 + the image's class (11 classes), labels (N, 32, 32). The model
(Functional): two steps down (Conv2D without bias, BatchNormalization, ReLU, MaxPooling2D), a
bottleneck Conv2D, then up by a Conv2DTranspose(strides 2, same) and by a bilinear
UpSampling2D, each Concatenated with its skip and followed by a Conv2D, and a last Conv2D(11, 1):
logits per pixel, SparseCategoricalCrossentropy(from_logits=True), accuracy (Keras' per-pixel
sparse_categorical_accuracy), SGD(0.05, momentum 0.9). Logits, because with a softmax output
Keras' JAX backend clips each probability to [1e-7, 1 - 1e-7] before its logarithm while
mwtrain folds the softmax into the loss and computes it from the logits (Keras' TensorFlow
backend's way, docs/losses.md): a pixel whose true class has a probability below 1e-7 gets
Keras' constant -log(1e-7) and no gradient, mwtrain's exact loss and gradient. With 32 x 1,024
pixels a batch, this U-Net has such a pixel by its 8th step (checked: the first 7 steps agree
within 1.1e-6, Keras' float32 and float64 steps within 2e-7 of each other). The bench keeps
the softmax (the task as a user writes it) and compares the training's outcome. Keras saves it; mwtrain and Keras'
fit train the same archive on the same batches (--no-shuffle, shuffle=False).

    unet_e2e.py MWTRAIN WORKDIR                  the test (suite 'keras')
    unet_e2e.py MWTRAIN WORKDIR --bench N EPOCHS the comparison of tests/bench/unet_fashion.sh

The test: 256 training and 64 test images, batches of 32, one epoch (8 steps). Asserted:
  - mwtrain's initial weights are the archive's, bit for bit;
  - the weights after the 8 steps within TOL_W = 1e-4 of each variable's largest value. The
    argument: one step's gradients agree with Keras' float64 step within 3.0e-6 of the largest
    (the U-Net of tests/keras/parity/parity.py: float32 sums of up to 3 x 3 x 32 products in
    another order than XLA's), a weight moves by the learning rate times that, and 8 steps of
    momentum 0.9 add up at most 8 such moves: measured 2.0e-6 of each variable's largest value
    (the control below, which changes one layer's math, moves them 1.7e-1); 1e-4 leaves a factor
    of 50 for another instruction set's sums;
  - the train and test loss within TOL_LOSS = 1e-4 relative (measured 3.6e-8 and 4.3e-7, the
    test loss through the moving statistics); the pixel accuracies within 1e-4
    (a share of 8 x 32 x 1,024 or 65,536 pixels: a pixel whose two largest probabilities lie
    within rounding of each other may go either way, each worth 1.5e-5);
  - the control: the same archive with its UpSampling2D "nearest" instead of "bilinear",
    trained by Keras, differs from mwtrain's weights by more than TOL_W;
  - `export --format keras` of the checkpoint: Keras loads the archive, and its evaluate() of
    the test set equals mwtrain's test loss within 1e-5 (the same weights); the same for a
    Keras 2 Sequential JSON (UpSampling2D, Conv2DTranspose with output_padding), which the
    export writes in Keras 3's form from mwtrain's own layers;
  - refused with the exit code and a message naming the shapes: labels (N, 30, 30) beside the
    32 x 32 model (exit 3), labels (N,) beside it (exit 3), labels (N, 32, 32) beside a
    classifier (exit 3), labels (N, 32, 32, 1) (exit 3: the data's shape), and an
    UpSampling2D of interpolation "bicubic" (exit 2: Keras has it, mwtrain not).

--bench N EPOCHS: N training images (the test set the first N / 4 of t10k), EPOCHS epochs of
32, the softmax model, both sides timed; prints each epoch's loss and pixel accuracy (train and
test) of each side. After hundreds of steps the two trajectories are no longer the same numbers
(the clipped pixels above, and float32 differences that training amplifies), only the same
training; so the tolerance is measured, not assumed: Keras trains the archive a second time on
another batch order (shuffle=True, seed 1), and mwtrain's last test pixel accuracy and test loss
must lie within twice the distance between Keras' two runs (at least BENCH_ACC = 0.005 and
BENCH_LOSS = 2 % relative) of Keras' own run on mwtrain's batches."""
import gzip
import json
import os
import subprocess
import sys
import time
import warnings
import zipfile

os.environ.setdefault("KERAS_BACKEND", "jax")
warnings.filterwarnings("ignore")
import keras  # noqa: E402
import numpy as np  # noqa: E402
from oracle import DATA, check, finish, metrics_rows  # noqa: E402

L = keras.layers
THRESH, K, S, B = 64, 11, 32, 32
TOL_W, TOL_LOSS, TOL_ACC, TOL_EXPORT = 1e-4, 1e-4, 1e-4, 1e-5
BENCH_ACC, BENCH_LOSS = 0.005, 0.02


def idx(name):
    with gzip.open(os.path.join(DATA, name)) as f:
        b = f.read()
    dims = b[3]
    shape = [int.from_bytes(b[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(b, np.uint8, offset=4 + 4 * dims).reshape(shape)


def segmentation(images, labels):
    """Images (N, 28, 28) uint8 -> x (N, 32, 32, 1) float32 in [0, 1] and y (N, 32, 32): 0 for
    the background, 1 + the class where the pixel is at least THRESH."""
    img = np.pad(images, ((0, 0), (2, 2), (2, 2)))
    y = np.where(img >= THRESH, labels[:, None, None].astype(np.int32) + 1, 0).astype(np.uint8)
    return (img.astype(np.float32) / 255.0)[..., None], y


def make_data(path, n_train, n_test):
    x, y = segmentation(idx("train-images-idx3-ubyte.gz")[:n_train],
                        idx("train-labels-idx1-ubyte.gz")[:n_train])
    xt, yt = segmentation(idx("t10k-images-idx3-ubyte.gz")[:n_test],
                          idx("t10k-labels-idx1-ubyte.gz")[:n_test])
    np.savez(path, x_train=x, y_train=y, x_test=xt, y_test=yt)
    return x, y, xt, yt


def unet(seed, interpolation="bilinear", softmax=False):
    keras.utils.set_random_seed(seed)
    inp = keras.Input((S, S, 1), name="image")

    def block(x, filters, name):
        x = L.Conv2D(filters, 3, padding="same", use_bias=False, name=name)(x)
        return L.Activation("relu", name=name + "_relu")(L.BatchNormalization(name=name + "_bn")(x))

    c1 = block(inp, 8, "down1")                                      # 32 x 32 x 8
    c2 = block(L.MaxPooling2D(name="pool1")(c1), 16, "down2")        # 16 x 16 x 16
    b = L.Conv2D(32, 3, padding="same", activation="relu", name="bottom")(
        L.MaxPooling2D(name="pool2")(c2))                            # 8 x 8 x 32
    u2 = L.Conv2DTranspose(16, 3, strides=2, padding="same", name="up2")(b)
    u2 = L.Conv2D(16, 3, padding="same", activation="relu", name="dec2")(
        L.Concatenate(name="skip2")([u2, c2]))                       # 16 x 16 x 16
    u1 = L.UpSampling2D(interpolation=interpolation, name="up1")(u2)
    u1 = L.Conv2D(8, 3, padding="same", activation="relu", name="dec1")(
        L.Concatenate(name="skip1")([u1, c1]))                       # 32 x 32 x 8
    out = L.Conv2D(K, 1, activation="softmax" if softmax else None, name="out")(u1)
    m = keras.Model(inp, out, name="unet")
    m.compile(optimizer=keras.optimizers.SGD(0.05, momentum=0.9),
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=not softmax),
              metrics=["accuracy"])
    return m


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True)


def mwtrain(mw, work, tag, model, data, n_test, *args):
    cmd = [mw, "train", "--data", data, "--model", model, "--batch-per-replica", str(B),
           "--threads", "1", "--no-shuffle", "--test-examples", str(n_test), "--summary-dir",
           os.path.join(work, tag + "-logs"), "--checkpoint-dir", os.path.join(work, tag + "-ck"),
           "--progress", "none", *args]
    r = run(cmd)
    ok = check(r.returncode == 0, "%s: exit %d%s" % (tag, r.returncode,
                                                      "\n" + r.stderr[-800:] if r.returncode
                                                      else ""))
    return r.stdout if ok else None


def split(flat, shapes):
    cuts = np.cumsum([int(np.prod(s)) for s in shapes])[:-1]
    return [a.reshape(s) for a, s in zip(np.split(flat, cuts), shapes)]


def rel_err(got, want):
    return max(float(np.max(np.abs(np.ravel(g) - np.ravel(w))) /
                     max(np.max(np.abs(w)), 1e-30)) for g, w in zip(got, want))


def rel(a, b):
    return abs(a - b) / max(abs(b), 1e-30)


def last_line(p):
    return ((p.stdout + p.stderr).strip().splitlines() or [""])[-1]


def train_case(mw, work):
    data, path = os.path.join(work, "seg.npz"), os.path.join(work, "unet.keras")
    x, y, xt, yt = make_data(data, 256, 64)
    model = unet(3)
    model.save(path)
    shapes = [tuple(w.shape) for w in model.weights]
    init = os.path.join(work, "init.bin")
    if mwtrain(mw, work, "init", path, data, 64, "--epochs", "0", "--dump-weights", init) is None:
        return None
    init_w = split(np.fromfile(init, "<f4"), shapes)
    check(all(np.array_equal(a, np.asarray(w)) for a, w in zip(init_w, model.weights)),
          "mwtrain's initial weights are the archive's")
    out = os.path.join(work, "w.bin")
    if mwtrain(mw, work, "fit", path, data, 64, "--epochs", "1", "--dump-weights", out) is None:
        return None
    got = split(np.fromfile(out, "<f4"), shapes)
    k = keras.models.load_model(path)
    h = k.fit(x, y, batch_size=B, epochs=1, shuffle=False, verbose=0).history
    ev = k.evaluate(xt, yt, batch_size=64, verbose=0, return_dict=True)
    werr = rel_err(got, k.get_weights())
    check(werr <= TOL_W, "weights after 8 steps, relative %.2e <= %g" % (werr, TOL_W))
    ctl = unet(3, interpolation="nearest")
    ctl.set_weights(init_w)
    ctl.fit(x, y, batch_size=B, epochs=1, shuffle=False, verbose=0)
    cerr = rel_err(got, ctl.get_weights())
    check(cerr > TOL_W, "control: against Keras with a nearest UpSampling2D, %.2e > %g"
          % (cerr, TOL_W))
    row = metrics_rows(os.path.join(work, "fit-logs"))[0]
    lerr, terr = rel(row["train/loss"], h["loss"][0]), rel(row["test/loss"], ev["loss"])
    check(lerr <= TOL_LOSS and terr <= TOL_LOSS,
          "train loss %.9g, test loss %.9g = Keras' %.9g, %.9g (relative %.1e, %.1e)" %
          (row["train/loss"], row["test/loss"], h["loss"][0], ev["loss"], lerr, terr))
    aerr = max(abs(row["train/accuracy"] - h["accuracy"][0]),
               abs(row["test/accuracy"] - ev["accuracy"]))
    check(aerr <= TOL_ACC, "pixel accuracy %.6f, test %.6f = Keras' %.6f, %.6f (%.1e)" %
          (row["train/accuracy"], row["test/accuracy"], h["accuracy"][0], ev["accuracy"], aerr))
    print("weights %.2e (control %.2e), train loss %.1e, test loss %.1e, accuracy %.1e" %
          (werr, cerr, lerr, terr, aerr))
    return dict(path=path, data=data, xt=xt, yt=yt, test_loss=row["test/loss"])


def export(mw, work, r):
    out = os.path.join(work, "exported.keras")
    p = run([mw, "export", "--checkpoint-dir", os.path.join(work, "fit-ck"), "--format", "keras",
             "--output", out])
    if not check(p.returncode == 0, "export: exit %d %s" % (p.returncode, p.stderr[-600:])):
        return
    m = keras.models.load_model(out)
    ev = m.evaluate(r["xt"], r["yt"], batch_size=64, verbose=0, return_dict=True)
    check(rel(ev["loss"], r["test_loss"]) <= TOL_EXPORT,
          "export: Keras' evaluate of the exported archive %.9g = mwtrain's test loss %.9g" %
          (ev["loss"], r["test_loss"]))
    cfg = json.loads(zipfile.ZipFile(out).read("config.json"))
    classes = {lay["class_name"] for lay in cfg["config"]["layers"]}
    check({"Conv2DTranspose", "UpSampling2D", "Concatenate"} <= classes,
          "export: the archive's layers %s" % sorted(classes))


def keras2_export(mw, work, r):
    """A Keras 2 Sequential JSON (batch_input_shape; Keras 3 cannot read it) exports through
    mwtrain's own Keras 3 config of each layer: Keras loads it and evaluates the test set as
    mwtrain's last epoch did."""
    layer = lambda cls, **c: {"class_name": cls, "config": c}  # noqa: E731
    model = {"class_name": "Sequential", "config": {"name": "seg2", "layers": [
        layer("InputLayer", batch_input_shape=[None, S, S, 1], name="in"),
        layer("Conv2D", name="c1", filters=4, kernel_size=[3, 3], padding="same",
              activation="relu"),
        layer("MaxPooling2D", name="p1"), layer("MaxPooling2D", name="p2"),
        layer("UpSampling2D", name="up", size=[2, 2], interpolation="bilinear"),
        layer("Conv2DTranspose", name="t", filters=K, kernel_size=[3, 3], strides=[2, 2],
              padding="same", output_padding=[1, 1], use_bias=False)]}}
    path, out = os.path.join(work, "seg2.json"), os.path.join(work, "seg2.keras")
    json.dump(model, open(path, "w"))
    if mwtrain(mw, work, "k2", path, r["data"], 64, "--epochs", "1") is None:
        return
    p = run([mw, "export", "--checkpoint-dir", os.path.join(work, "k2-ck"), "--format", "keras",
             "--output", out])
    if not check(p.returncode == 0, "Keras 2 source export: exit %d %s" %
                 (p.returncode, p.stderr[-600:])):
        return
    ev = keras.models.load_model(out).evaluate(r["xt"], r["yt"], batch_size=64, verbose=0,
                                               return_dict=True)
    want = metrics_rows(os.path.join(work, "k2-logs"))[0]["test/loss"]
    check(rel(ev["loss"], want) <= TOL_EXPORT,
          "Keras 2 source export: Keras' evaluate %.9g = mwtrain's test loss %.9g" %
          (ev["loss"], want))


def refused(mw, work, tag, model, data, code, *parts):
    p = run([mw, "train", "--model", model, "--data", data, "--epochs", "1", "--summary-dir", "",
             "--checkpoint-dir", os.path.join(work, tag + "-ck"), "--progress", "none"])
    last = last_line(p)
    check(p.returncode == code and all(s in last for s in parts),
          "refused, %s: exit %d (want %d), %s" % (tag, p.returncode, code, last))


def refusals(mw, work, r):
    d = dict(np.load(r["data"]))

    def data(tag, **arrays):
        path = os.path.join(work, tag + ".npz")
        np.savez(path, **dict(d, **arrays))
        return path

    refused(mw, work, "labels-30", r["path"],
            data("l30", y_train=d["y_train"][:, 1:31, 1:31], y_test=d["y_test"][:, 1:31, 1:31]),
            3, "labels (N, 30, 30), a class per pixel", "(layer 'out') is (None, 32, 32, 11)")
    refused(mw, work, "labels-n", r["path"],
            data("ln", y_train=d["y_train"].max(axis=(1, 2)), y_test=d["y_test"].max(axis=(1, 2))),
            2,
            "(None, 32, 32, 11)", "labels (N, 32, 32)")
    refused(mw, work, "labels-4d", r["path"],
            data("l4", y_train=d["y_train"][..., None], y_test=d["y_test"][..., None]), 3,
            "labels of shape (256, 32, 32, 1)", "(N, H, W) per pixel")
    clf = keras.Sequential([keras.Input((S, S, 1)), L.Flatten(), L.Dense(K)], name="clf")
    clf_path = os.path.join(work, "clf.keras")
    clf.save(clf_path)
    refused(mw, work, "classifier", clf_path, r["data"], 3,
            "labels (N, 32, 32), a class per pixel", "is not an image: (None, 11)")
    cfg = json.loads(zipfile.ZipFile(r["path"]).read("config.json"))
    for lay in cfg["config"]["layers"]:
        if lay["class_name"] == "UpSampling2D":
            lay["config"]["interpolation"] = "bicubic"
    bicubic = os.path.join(work, "bicubic.json")
    json.dump(cfg, open(bicubic, "w"))
    refused(mw, work, "bicubic", bicubic, r["data"], 2, "layer 'up1' (UpSampling2D)",
            "interpolation \"bicubic\" is not supported")


def bench(mw, work, n, epochs):
    data, path = os.path.join(work, "seg.npz"), os.path.join(work, "unet.keras")
    x, y, xt, yt = make_data(data, n, n // 4)
    unet(3, softmax=True).save(path)
    t0 = time.time()
    if mwtrain(mw, work, "bench", path, data, n // 4, "--epochs", str(epochs)) is None:
        return
    t_mw = time.time() - t0
    rows = metrics_rows(os.path.join(work, "bench-logs"))
    t0 = time.time()
    hist = keras_fit(path, x, y, xt, yt, epochs, shuffle=False)
    t_k = time.time() - t0
    keras.utils.set_random_seed(1)
    other = keras_fit(path, x, y, xt, yt, epochs, shuffle=True)
    print("U-Net, Fashion-MNIST segmentation (11 classes per pixel): %d training and %d test "
          "images, %d epochs of %d" % (n, n // 4, epochs, B))
    print("epoch  mwtrain: loss   pixel acc  test loss  test acc |  Keras: loss   pixel acc  "
          "test loss  test acc")
    for e, (r, kh) in enumerate(zip(rows, hist)):
        print("%5d  %13.5f %10.5f %10.5f %9.5f | %13.5f %10.5f %10.5f %9.5f" %
              (e + 1, r["train/loss"], r["train/accuracy"], r["test/loss"], r["test/accuracy"],
               *kh))
    print("Keras on another batch order: test loss %.5f, test pixel accuracy %.5f" % other[-1][2:])
    print("wall time: mwtrain %.1f s, Keras (JAX, CPU) %.1f s" % (t_mw, t_k))
    last, kl, ko = rows[-1], hist[-1], other[-1]
    tol_acc = max(2 * abs(ko[3] - kl[3]), BENCH_ACC)
    tol_loss = max(2 * rel(ko[2], kl[2]), BENCH_LOSS)
    check(abs(last["test/accuracy"] - kl[3]) <= tol_acc,
          "last epoch's test pixel accuracy %.5f = Keras' %.5f within %.4f (Keras' two runs: "
          "%.4f apart)" % (last["test/accuracy"], kl[3], tol_acc, abs(ko[3] - kl[3])))
    check(rel(last["test/loss"], kl[2]) <= tol_loss,
          "last epoch's test loss %.5f = Keras' %.5f within %.4f relative (Keras' two runs: "
          "%.4f)" % (last["test/loss"], kl[2], tol_loss, rel(ko[2], kl[2])))


def keras_fit(path, x, y, xt, yt, epochs, shuffle):
    """Keras trains the archive: each epoch's (loss, accuracy, test loss, test accuracy)."""
    k, hist = keras.models.load_model(path), []
    for _ in range(epochs):
        h = k.fit(x, y, batch_size=B, epochs=1, shuffle=shuffle, verbose=0).history
        ev = k.evaluate(xt, yt, batch_size=B, verbose=0, return_dict=True)
        hist.append((h["loss"][0], h["accuracy"][0], ev["loss"], ev["accuracy"]))
    return hist


def main():
    mw, work = sys.argv[1], sys.argv[2]
    if len(sys.argv) > 3 and sys.argv[3] == "--bench":
        bench(mw, work, int(sys.argv[4]), int(sys.argv[5]))
        return finish()
    r = train_case(mw, work)
    if r:
        export(mw, work, r)
        keras2_export(mw, work, r)
        refusals(mw, work, r)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
