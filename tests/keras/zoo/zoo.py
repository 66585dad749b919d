"""One SGD step of a Keras model through the whole product: the model saved by Keras as a
.keras archive, `mwtrain train` for one step of 32 Fashion-MNIST images, `mwtrain export
--format keras`, the archive reloaded by Keras. Measured against Keras' own step of the same
batch from the same archive computed in float64 (the yardstick):

    zoo.py MWTRAIN NAME...       (NAME: a model of MODELS below, or "ci" / "all"; the files in
                                 a temporary folder, or in $ZOO_WORK when set, kept)

Error of a variable: max |w - w64| / max |w64 - w0| (w0 the archive's, w64 after the float64
step): the step's error relative to the step. A variable the step hardly moves (its change
under 1e-4 of the largest change in the model, e.g. a convolution bias that BatchNormalization
follows: its exact gradient is 0) is measured against the largest change instead.

The floor. A float32 step is not one number: the same Keras model stepped by float32
computations that differ only in summation order (JAX's jitted step on the batch as given and
on PERMS permutations of it: the loss is a mean over examples, so all are the same step in exact
arithmetic) lands at different distances from float64. In a deep network of ReLUs that
spread is set by the ReLU inputs lying within float32 rounding of 0 (a few tens in ResNet50 at
32x32: each decided either way by rounding, and a flip moves the gradients of the layers below
it; at 1x1 spatial size and 32 examples a flip is a few percent of a BatchNormalization's
gradient). mwtrain's rounding decides its own set of these, so its distance is one more draw
from the same spread, and one permutation is too few draws to see that spread: on a 2-core
AMX host the small ResNet's Keras steps land at 3.1e-4 on the batch as given and on 4 of 8
permutations, at 5.4e-3 (one ReLU input of block 2 on the other side of 0) on the other 4;
mwtrain's fast backend lands at 5.4e-3 and its reference at 3.1e-4. The floor takes the
largest of the permuted draws (PERMS of them: a decision that rounds either way at even odds
is missed by all of them once in 2^PERMS). The test: mwtrain's distance at most FACTOR times the larger of Keras'
float32 distances (its own float32 floor on that model and batch); with $ZOO_TF_PYTHON (the
TensorFlow venv's python, as tests/bench/zoo.sh sets it) Keras' step on its TensorFlow backend is
a third draw (NASNetMobile: 3.8e-3 and 1.6e-2 on JAX, 0.50 on TensorFlow). FACTOR 4: on the models
here the two Keras draws differ by up to 2x between themselves, and mwtrain's (another order of
sums, another set of flipped decisions) has to sit within that spread and a margin of 2x
beside it; a wrong gradient (a missing term, a wrong epsilon, a transposed kernel) lands at
1e-2 to 1 on the layers it touches, far outside it on the models whose floor is 1e-5 to 1e-3.

Also checked: Keras reloads the export, and its evaluate() of the test set (the same 32 images)
equals the test loss mwtrain wrote for that step (metrics.csv, 9 digits) within 1e-5 relative,
or 4 times Keras' own float32 error of that loss (against its float64 evaluation) where that is
larger.
With a softmax output both fold it into the loss as Keras' TensorFlow backend does (its
softmax hands the loss its logits); Keras on JAX instead clips the probabilities to 1e-7,
which an untrained ResNet50 in inference mode (logits hundreds apart) reaches: there the
reloaded model's logits (its last layer's activation set to linear) give the loss.
Each model prints one line; the worst layers are listed with Keras' float32 figure beside.
"ci" ends with a control that shows the test can fail: the small ResNet's archive with every
BatchNormalization epsilon set to Keras' default 1e-3 (the archive says 1.001e-5: the bug of
reading the default instead of the file), trained by mwtrain and judged against Keras' steps of
the true archive, must land outside the limit."""
import gzip
import json
import os
import subprocess
import sys
import tempfile
import zipfile

# ONEDNN_MAX_CPU_ISA is meant for mwtrain's kernels (the test run's AVX2 pass): the oracle keeps
# the host's own, as XLA's CPU kernels read the variable too
MW_ENV = dict(os.environ)
os.environ.pop("ONEDNN_MAX_CPU_ISA", None)
os.environ.setdefault("KERAS_BACKEND", "jax")
import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)  # the float64 yardstick
import jax.numpy as jnp  # noqa: E402
import keras  # noqa: E402
import numpy as np  # noqa: E402
from keras import layers  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import numpy_draws  # noqa: E402

numpy_draws.install()  # initial weights drawn by numpy (tests/keras/numpy_draws.py)

N = 32
PERMS = 8
LR = 0.01
FACTOR = 4.0
EVAL_TOL = 1e-5
FMNIST = "/usr/share/datasets/fashion-mnist/"


def small_resnet():
    """A stem and three ResNet identity blocks (BatchNormalization epsilon 1.001e-5 as
    keras.applications' ResNets), GlobalAveragePooling2D, a softmax head."""
    inp = keras.Input((32, 32, 3))
    x = layers.Conv2D(16, 3, padding="same")(inp)
    x = layers.BatchNormalization(epsilon=1.001e-5)(x)
    x = layers.Activation("relu")(x)
    for _ in range(3):
        y = layers.Conv2D(16, 3, padding="same")(x)
        y = layers.BatchNormalization(epsilon=1.001e-5)(y)
        y = layers.Activation("relu")(y)
        y = layers.Conv2D(16, 3, padding="same")(y)
        y = layers.BatchNormalization(epsilon=1.001e-5)(y)
        x = layers.Activation("relu")(layers.Add()([x, y]))
    x = layers.GlobalAveragePooling2D()(x)
    return keras.Model(inp, layers.Dense(10, activation="softmax")(x), name="small_resnet")


def bottleneck_resnet():
    """ResNet50's stem (ZeroPadding2D, 7x7 stride-2 conv, BN, ReLU, ZeroPadding2D, 3x3 stride-2
    max pooling) and two of its bottleneck blocks (a projection block with a strided 1x1
    convolution, an identity block), at width 16/64."""
    inp = keras.Input((32, 32, 3))
    x = layers.ZeroPadding2D(3)(inp)
    x = layers.Conv2D(16, 7, strides=2)(x)
    x = layers.BatchNormalization(epsilon=1.001e-5)(x)
    x = layers.Activation("relu")(x)
    x = layers.ZeroPadding2D(1)(x)
    x = layers.MaxPooling2D(3, strides=2)(x)
    for stride, project in ((2, True), (1, False)):
        s = x
        if project:
            s = layers.Conv2D(64, 1, strides=stride)(x)
            s = layers.BatchNormalization(epsilon=1.001e-5)(s)
        y = layers.Conv2D(16, 1, strides=stride)(x)
        y = layers.Activation("relu")(layers.BatchNormalization(epsilon=1.001e-5)(y))
        y = layers.Conv2D(16, 3, padding="same")(y)
        y = layers.Activation("relu")(layers.BatchNormalization(epsilon=1.001e-5)(y))
        y = layers.Conv2D(64, 1)(y)
        y = layers.BatchNormalization(epsilon=1.001e-5)(y)
        x = layers.Activation("relu")(layers.Add()([s, y]))
    x = layers.GlobalAveragePooling2D()(x)
    return keras.Model(inp, layers.Dense(10, activation="softmax")(x), name="bottleneck")


def grouped_resnext():
    """Grouped convolutions (Conv2D groups) as ResNeXt builds its bottlenecks: two blocks of a
    1x1 convolution, a 3x3 one in 4 groups and a 1x1 one back, the second block's 1x1s in 2
    groups themselves; then a strided 'valid' 3x3 in 8 groups (2 channels in, 3 out each)
    before the head."""
    inp = keras.Input((32, 32, 3))
    x = layers.Conv2D(16, 3, strides=2, padding="same")(inp)
    x = layers.Activation("relu")(layers.BatchNormalization(epsilon=1.001e-5)(x))
    for g in (1, 2):
        y = layers.Conv2D(32, 1, groups=g, use_bias=False)(x)
        y = layers.Activation("relu")(layers.BatchNormalization(epsilon=1.001e-5)(y))
        y = layers.Conv2D(32, 3, padding="same", groups=4, use_bias=False)(y)
        y = layers.Activation("relu")(layers.BatchNormalization(epsilon=1.001e-5)(y))
        y = layers.Conv2D(16, 1, groups=g, use_bias=False)(y)
        y = layers.BatchNormalization(epsilon=1.001e-5)(y)
        x = layers.Activation("relu")(layers.Add()([x, y]))
    x = layers.Conv2D(24, 3, strides=2, groups=8, activation="relu")(x)
    x = layers.GlobalAveragePooling2D()(x)
    return keras.Model(inp, layers.Dense(10, activation="softmax")(x), name="grouped_resnext")


def rescaled_convnet():
    """Rescaling with a scale and an offset per channel, as EfficientNet's ImageNet build divides
    by each channel's deviation: leading (mwtrain's input pipeline), after a convolution of 3
    channels, and after one of 8 with a single offset (a layer each)."""
    inp = keras.Input((32, 32, 3))
    x = layers.Rescaling([2.0, 1.0, 0.5], offset=[-1.0, 0.0, 0.25])(inp)
    x = layers.Conv2D(3, 3, padding="same")(x)
    x = layers.Rescaling([1 / 0.229 ** 0.5, 1 / 0.224 ** 0.5, 1 / 0.225 ** 0.5])(x)
    x = layers.Conv2D(8, 3, strides=2)(x)
    x = layers.Activation("relu")(layers.BatchNormalization()(x))
    x = layers.Rescaling([0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0, 2.25], offset=0.1)(x)
    x = layers.GlobalAveragePooling2D()(x)
    return keras.Model(inp, layers.Dense(10, activation="softmax")(x), name="rescaled_convnet")


def grouped_sequential():
    """The same two layers read from a Sequential model: a per-channel Rescaling leading and
    after a grouped convolution of 8 channels, a Conv2D in 4 groups."""
    return keras.Sequential([
        keras.Input((32, 32, 3)),
        layers.Rescaling([2.0, 1.0, 0.5], offset=[-1.0, 0.0, 0.25]),
        layers.Conv2D(8, 3, strides=2, activation="relu"),
        layers.Conv2D(8, 3, padding="same", groups=4),
        layers.Rescaling([0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0, 2.25]),
        layers.Conv2D(12, 3, strides=2, groups=2, activation="relu"),
        layers.GlobalAveragePooling2D(),
        layers.Dense(10, activation="softmax"),
    ], name="grouped_sequential")


def app(ctor, size=32):
    def make():
        return getattr(keras.applications, ctor)(weights=None, classes=10,
                                                 input_shape=(size, size, 3))
    return make


# every family of keras.applications at its smallest size (InceptionV3 and InceptionResNetV2
# need 75x75, Xception 71x71)
APPS = {
    "ConvNeXtTiny": app("ConvNeXtTiny"), "DenseNet121": app("DenseNet121"),
    "EfficientNetB0": app("EfficientNetB0"), "EfficientNetV2B0": app("EfficientNetV2B0"),
    "InceptionV3": app("InceptionV3", 75), "InceptionResNetV2": app("InceptionResNetV2", 75),
    "MobileNet": app("MobileNet"), "MobileNetV2": app("MobileNetV2"),
    "MobileNetV3Small": app("MobileNetV3Small"), "NASNetMobile": app("NASNetMobile"),
    "ResNet50": app("ResNet50"), "ResNet50V2": app("ResNet50V2"), "VGG16": app("VGG16"),
    "Xception": app("Xception", 71),
}
MODELS = {"small_resnet": small_resnet, "bottleneck_resnet": bottleneck_resnet,
          "grouped_resnext": grouped_resnext, "rescaled_convnet": rescaled_convnet,
          "grouped_sequential": grouped_sequential, **APPS}
CI = ["small_resnet", "bottleneck_resnet", "grouped_resnext", "rescaled_convnet",
      "grouped_sequential"]


def load_fmnist(n, size):
    """The first n training images, zero-padded to size x size, three equal channels, in
    [0, 1]; their labels."""
    with gzip.open(FMNIST + "train-images-idx3-ubyte.gz") as f:
        x = np.frombuffer(f.read(), np.uint8, offset=16)[: n * 784].reshape(n, 28, 28)
    with gzip.open(FMNIST + "train-labels-idx1-ubyte.gz") as f:
        y = np.frombuffer(f.read(), np.uint8, offset=8)[:n].astype(np.int64)
    p = size - 28
    x = np.pad(x, ((0, 0), (p // 2, p - p // 2), (p // 2, p - p // 2)))
    return np.repeat(x[..., None], 3, axis=-1).astype(np.float32) / 255.0, y


def no_dropout(model):
    for lay in model._flatten_layers():
        if isinstance(lay, (layers.Dropout, layers.SpatialDropout2D)):
            lay.rate = 0.0


def twin64(model):
    """The same model computing in float64 (every float32 policy of its config, nested
    ones too), with the same weights widened exactly."""
    def widen(o):
        if isinstance(o, dict):
            return {k: ("float64" if v == "float32" else widen(v)) for k, v in o.items()}
        if isinstance(o, list):
            return [widen(v) for v in o]
        return o
    twin = keras.models.model_from_json(json.dumps(widen(json.loads(model.to_json()))))
    twin.set_weights([np.asarray(w.value, np.float64) for w in model.weights])
    no_dropout(twin)
    return twin


def keras_stepper(model):
    """Keras' SGD step (no momentum) of the mean loss over a batch, jitted as fit() runs it, as
    a function of the batch (x, y): one executable for every batch of the model (the permuted
    draws of the floor; XLA compiles a ResNet's step in 1-2 s, and with the batch a constant
    of the step ten compiles per model were most of this test's time). It returns every
    variable after the step, in model.weights order (BatchNormalization's moving statistics
    updated by the same forward pass), in the model's own precision: a float32 variable keeps
    w - lr g rounded to float32, as Keras' optimizer assigns it (and mwtrain's export holds).
    A softmax output's loss is computed from its logits, as Keras' TensorFlow backend does (its
    softmax hands the loss the logits) and mwtrain does: Keras on JAX clips the probabilities
    at 1e-7 instead, which EfficientNetB0's first step reaches (a training loss of 6.124
    clipped, 6.355 from the logits on both TensorFlow and mwtrain), and an example past the
    clip then has no gradient on JAX."""
    tv = [v.value for v in model.trainable_variables]
    ntv = [v.value for v in model.non_trainable_variables]
    last = model.layers[-1]
    logits = getattr(getattr(last, "activation", None), "__name__", "") == "softmax"

    def f(tv, ntv, x, y):
        out, ntv2 = model.stateless_call(tv, ntv, x, training=True)
        return jnp.mean(keras.losses.sparse_categorical_crossentropy(y, out, from_logits=logits)), \
            ntv2

    grad = jax.jit(jax.value_and_grad(f, has_aux=True))

    def step(x, y):
        if logits:  # the loss from the logits (traced on the first call)
            last.activation = keras.activations.linear
        (_, ntv2), g = grad(tv, ntv, x, y)
        if logits:
            last.activation = keras.activations.softmax
        new = {id(v): np.asarray(np.asarray(a) - np.asarray(LR, np.asarray(a).dtype) *
                                 np.asarray(b), np.float64)
               for v, a, b in zip(model.trainable_variables, tv, g)}
        new.update({id(v): np.asarray(a, np.float64)
                    for v, a in zip(model.non_trainable_variables, ntv2)})
        return [new[id(v)] for v in model.weights]
    return step


def distances(paths, w, w64, w0):
    """Each variable's error (module docstring) of the weights w against the float64 step."""
    big = max(float(np.abs(a - b).max()) for a, b in zip(w64, w0))
    out = []
    for a, b, c in zip(w, w64, w0):
        change = float(np.abs(b - c).max())
        den = change if change >= 1e-4 * big else big
        out.append(float(np.abs(a - b).max()) / den)
    return out


def by_layer(paths, errs):
    worst = {}
    for p, e in zip(paths, errs):
        layer = p.rsplit("/", 1)[0]
        worst[layer] = max(worst.get(layer, 0.0), e)
    return worst


def test_loss(model, x, y):
    """Keras' test loss of model on (x, y); with a softmax output from the logits (the last
    layer's activation set to linear), as Keras' TensorFlow backend and mwtrain compute it."""
    last = model.layers[-1]
    if getattr(getattr(last, "activation", None), "__name__", "") != "softmax":
        return float(model.evaluate(x, y, batch_size=N, verbose=0, return_dict=True)["loss"])
    last.activation = keras.activations.linear
    z = np.asarray(model.predict(x, batch_size=N, verbose=0), np.float64)
    last.activation = keras.activations.softmax
    z -= z.max(axis=1, keepdims=True)
    return float(np.mean(np.log(np.exp(z).sum(axis=1)) - z[np.arange(N), y]))


def run_mwtrain(mw, d, arch):
    ck = os.path.join(d, "ck")
    subprocess.run([mw, "train", "--model", arch, "--data", os.path.join(d, "data.npz"),
                    "--epochs", "1", "--batch-per-replica", str(N), "--no-shuffle",
                    "--optimizer", "sgd", "--momentum", "0", "--learning-rate", str(LR),
                    "--checkpoint-dir", ck, "--summary-dir", os.path.join(d, "logs"),
                    "--progress", "none"], check=True, stdout=subprocess.DEVNULL, env=MW_ENV)
    out = os.path.join(d, "out.keras")
    subprocess.run([mw, "export", "--format", "keras", "--checkpoint-dir", ck, "--output", out],
                   check=True, stdout=subprocess.DEVNULL, env=MW_ENV)
    with open(os.path.join(d, "logs", "metrics.csv")) as f:
        rows = [r.strip().split(",") for r in f if r.strip()]
    return out, float(rows[-1][rows[0].index("test/loss")])


def wrong_epsilon(arch, to):
    """A copy of the archive arch at to with every BatchNormalization epsilon 1e-3."""
    with zipfile.ZipFile(arch) as zin, zipfile.ZipFile(to, "w") as zout:
        for item in zin.infolist():
            data = zin.read(item.filename)
            if item.filename == "config.json":
                data = data.replace(b'"epsilon": 1.001e-05', b'"epsilon": 0.001')
            zout.writestr(item, data)


def check(mw, work, name, control=False):
    d = os.path.join(work, name + ("-control" if control else ""))
    os.makedirs(d, exist_ok=True)
    keras.utils.set_random_seed(1)
    model = MODELS[name]()
    no_dropout(model)
    model.compile(keras.optimizers.SGD(LR), "sparse_categorical_crossentropy")
    arch = os.path.join(d, "model.keras")
    model.save(arch)
    x, y = load_fmnist(N, model.input_shape[1])
    np.savez(os.path.join(d, "data.npz"), x_train=x, y_train=y, x_test=x, y_test=y)
    if control:
        wrong_epsilon(arch, os.path.join(d, "wrong.keras"))
    out, mw_test_loss = run_mwtrain(mw, d, os.path.join(d, "wrong.keras") if control else arch)

    back = keras.models.load_model(out, compile=True)
    keras_test_loss = test_loss(back, x, y)
    # the same evaluation in float64: an untrained network in inference mode can put its logits
    # thousands apart (EfficientNetV2B0: a loss of 564), where Keras' own float32 loss is off
    # by more than 1e-5; the limit is then 4 times that
    back64 = twin64(back)
    back64.compile(loss=back.loss)
    eval_floor = abs(keras_test_loss - test_loss(back64, x.astype(np.float64), y))
    eval_tol = max(EVAL_TOL, FACTOR * eval_floor / abs(keras_test_loss))
    w_mw = [np.asarray(w.value, np.float64) for w in back.weights]
    w0 = [np.asarray(w.value, np.float64) for w in model.weights]
    paths = [w.path for w in model.weights]
    w64 = keras_stepper(twin64(model))(x.astype(np.float64), y)
    e_mw = distances(paths, w_mw, w64, w0)
    step = keras_stepper(model)
    e_k = distances(paths, step(x, y), w64, w0)
    e_kp = [0.0] * len(paths)  # the largest of the permuted draws, per variable
    for p in range(PERMS):
        perm = np.random.default_rng(p).permutation(N)
        e = distances(paths, step(x[perm], y[perm]), w64, w0)
        e_kp = [max(a, b) for a, b in zip(e_kp, e)]
    draws = [max(e_k), max(e_kp)]
    if os.environ.get("ZOO_TF_PYTHON"):
        tf_out = os.path.join(d, "tf_step.npz")
        subprocess.run([os.environ["ZOO_TF_PYTHON"], os.path.join(os.path.dirname(__file__),
                        "tf_step.py"), arch, os.path.join(d, "data.npz"), str(LR), tf_out],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        z = np.load(tf_out)
        draws.append(max(distances(paths, [z[f"arr_{i}"] for i in range(len(paths))], w64, w0)))
    floor = max(draws)
    worst = int(np.argmax(e_mw))
    eval_err = abs(keras_test_loss - mw_test_loss) / abs(keras_test_loss)
    ok = max(e_mw) <= FACTOR * floor and eval_err <= eval_tol
    print(f"{'ok  ' if ok else 'FAIL'} {name + (' (control)' if control else ''):18s} mwtrain {max(e_mw):.2e} ({paths[worst]}) | "
          f"Keras float32 {max(e_k):.2e}, batch permuted {max(e_kp):.2e} (largest of {PERMS})"
          f"{f', TensorFlow {draws[2]:.2e}' if len(draws) > 2 else ''} | ratio "
          f"{max(e_mw) / floor:.2f} (limit {FACTOR:g}) | reload evaluate {keras_test_loss:.7f} "
          f"vs mwtrain {mw_test_loss:.7f} (rel {eval_err:.1e}, limit {eval_tol:.1e})", flush=True)
    lm, lk = by_layer(paths, e_mw), by_layer(paths, [max(a, b) for a, b in zip(e_k, e_kp)])
    for layer in sorted(lm, key=lm.get, reverse=True)[:4]:
        print(f"       layer {layer:34s} mwtrain {lm[layer]:.2e}  Keras float32 {lk[layer]:.2e}")
    return ok


def main():
    mw, names = sys.argv[1], sys.argv[2:]
    control = names == ["ci"]
    if control:
        names = CI
    elif names == ["all"]:
        names = list(MODELS)
    bad = [n for n in names if n not in MODELS]
    if bad:
        sys.exit(f"zoo.py: unknown model {bad[0]}; known: {', '.join(MODELS)}")
    with tempfile.TemporaryDirectory() as tmp:
        work = os.environ.get("ZOO_WORK") or tmp
        failed = [n for n in names if not check(mw, work, n)]
        if control and check(mw, work, "small_resnet", control=True):
            sys.exit("zoo.py: the control (a wrong BatchNormalization epsilon) was not caught")
    if failed:
        sys.exit(f"zoo.py: {len(failed)} of {len(names)} models outside the limits: "
                 f"{', '.join(failed)}")
    print(f"zoo.py: {len(names)} models within the limits")


if __name__ == "__main__":
    main()
