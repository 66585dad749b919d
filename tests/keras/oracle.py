"""Shared helpers of the Keras oracle tests: the mwtrain binary, Fashion-MNIST's test set as
Keras sees it, the models Keras builds, and checks that print both values on failure."""
import atexit
import csv
import glob
import gzip
import os
import shutil
import subprocess
import sys
import tempfile
import warnings

os.environ.setdefault("KERAS_BACKEND", "jax")
warnings.filterwarnings("ignore")

import numpy as np  # noqa: E402
import keras  # noqa: E402
import numpy_draws  # noqa: E402

# initial weights drawn by numpy, not one XLA compile per weight shape (numpy_draws.py)
numpy_draws.install()


def fix_keras_mask_ids():
    """Keras 3.6 keeps the mask of a tensor that takes no attributes (a JAX tracer) in a
    dictionary keyed by id(tensor), the mask held weakly: once the tensor is gone, its id can
    name another tensor, which then "has" the old mask, and a masked model's fit() fails at
    random ("Incompatible shapes for broadcasting: (32,) and (32, 12)": a stale (N, T) padding
    mask met the loss). Keras 3.15 removes the entry when its tensor dies (weakref.finalize);
    this installs that fix where the oracle's Keras lacks it."""
    import weakref
    from keras.src.backend.common import global_state, tensor_attributes as ta
    if hasattr(ta, "_clear_tensor_attr"):
        return

    def clear(tensor_id, attr):
        d = global_state.get_global_attribute(f"{attr}_dict")
        if d is not None:
            d.pop(tensor_id, None)

    def set_tensor_attr(tensor, attr, value):
        try:
            setattr(tensor, attr, value)
        except AttributeError:
            d = global_state.get_global_attribute(f"{attr}_dict")
            if d is None:
                if value is None:
                    return
                d = {}
                global_state.set_global_attribute(f"{attr}_dict", d)
            if value is not None:
                d[id(tensor)] = value
                weakref.finalize(tensor, clear, id(tensor), attr)
            else:
                d.pop(id(tensor), None)

    def get_tensor_attr(tensor, attr):
        if not hasattr(tensor, attr):
            d = global_state.get_global_attribute(f"{attr}_dict")
            return d.get(id(tensor)) if d is not None else None
        return getattr(tensor, attr, None)

    ta.set_tensor_attr, ta.get_tensor_attr = set_tensor_attr, get_tensor_attr
    from keras.src.backend.common import masking
    masking.set_tensor_attr, masking.get_tensor_attr = set_tensor_attr, get_tensor_attr


fix_keras_mask_ids()

MWTRAIN = os.path.join(os.environ["MW_BUILDDIR"], "worker", "mwtrain")
DATA = "/usr/share/datasets/fashion-mnist"
failures = []


def check(ok, what):
    """Record a failed check (all are reported; the script exits 1 at the end); ok."""
    print(("ok    " if ok else "FAIL  ") + what, flush=True)
    if not ok:
        failures.append(what)
    return ok


def finish():
    if failures:
        print(f"{len(failures)} check(s) failed", flush=True)
        sys.exit(1)
    print("all checks passed", flush=True)


def mwtrain(*args, cwd=None, expect=0):
    """Run mwtrain; its stdout. A different exit status fails the test at once."""
    p = subprocess.run([MWTRAIN, *args], cwd=cwd, capture_output=True, text=True)
    if p.returncode != expect:
        print(f"mwtrain {' '.join(args)}: exit {p.returncode}, expected {expect}\n"
              f"stdout:\n{p.stdout}\nstderr:\n{p.stderr}", flush=True)
        sys.exit(1)
    return p.stdout + p.stderr


def test_set():
    """x (10000, 28, 28, 1) float32 in [0, 1] and y (10000,) int32, as mwtrain scales them."""
    with gzip.open(f"{DATA}/t10k-images-idx3-ubyte.gz") as f:
        x = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 28, 28, 1)
    with gzip.open(f"{DATA}/t10k-labels-idx1-ubyte.gz") as f:
        y = np.frombuffer(f.read(), np.uint8, offset=8).astype(np.int32)
    return x.astype(np.float32) / np.float32(255), y


def tutorial_cnn():
    """The tutorial CNN, with Keras' automatic layer names (as mwtrain's built-in one)."""
    return keras.Sequential([
        keras.Input((28, 28, 1)),
        keras.layers.Conv2D(32, 3, activation="relu"),
        keras.layers.MaxPooling2D(),
        keras.layers.Conv2D(64, 3, activation="relu"),
        keras.layers.MaxPooling2D(),
        keras.layers.Flatten(),
        keras.layers.Dense(64, activation="relu"),
        keras.layers.Dense(10),
    ])


def mlp(dropout=0.2):
    """An MLP ending in softmax (mwtrain folds it into the loss), with Dropout (unless
    dropout=0) and a bias-free layer."""
    return keras.Sequential([
        keras.Input((28, 28, 1)),
        keras.layers.Flatten(),
        keras.layers.Dense(128, activation="relu"),
        *([keras.layers.Dropout(dropout)] if dropout else []),
        keras.layers.Dense(64, use_bias=False),
        keras.layers.ReLU(),
        keras.layers.Dense(10, activation="softmax"),
    ])


def compile_like_mwtrain(model):
    from_logits = model.layers[-1].get_config().get("activation") != "softmax"
    model.compile(optimizer=keras.optimizers.Adam(1e-3),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=from_logits),
                  metrics=["accuracy"])
    return model


def flat_weights(model):
    return np.concatenate([np.asarray(w, np.float32).ravel() for w in model.weights])


def metrics_rows(logs):
    """The rows of the metrics.csv under a --summary-dir (one per epoch), each {column: float}
    (empty cells left out); [] when there is none."""
    paths = glob.glob(os.path.join(logs, "**", "metrics.csv"), recursive=True)
    if not paths:
        return []
    with open(paths[0]) as f:
        return [{k: float(v) for k, v in r.items() if v != ""} for r in csv.DictReader(f)]


def read_csv(path):
    """metrics.csv: (header, rows as lists of floats)."""
    with open(path) as f:
        lines = [line.strip().split(",") for line in f if line.strip()]
    return lines[0], [[float(v) for v in r] for r in lines[1:]]


def workdir():
    """A fresh directory under $TMPDIR, removed when the test exits (kept when MW_KEEP_TMP is
    set, to look at after a failure)."""
    d = tempfile.mkdtemp(prefix="mwkeras-")
    if not os.environ.get("MW_KEEP_TMP"):
        atexit.register(shutil.rmtree, d, True)
    return d


def write_idx_dir(d, x_train, y_train, x_test, y_test):
    """An IDX data directory (gzip, as Debian's) of uint8 images (N, 28, 28) and labels."""
    import struct
    os.makedirs(d, exist_ok=True)
    for name, arr, magic in [("train-images-idx3-ubyte", x_train, 0x803),
                             ("train-labels-idx1-ubyte", y_train, 0x801),
                             ("t10k-images-idx3-ubyte", x_test, 0x803),
                             ("t10k-labels-idx1-ubyte", y_test, 0x801)]:
        arr = np.ascontiguousarray(arr, np.uint8)
        head = struct.pack(">I", magic) + b"".join(struct.pack(">I", n) for n in arr.shape)
        with gzip.open(os.path.join(d, name + ".gz"), "wb") as f:
            f.write(head + arr.tobytes())


def one_batch_data(n=64):
    """The first n test images as one global batch: (x, y, a work directory, an IDX data
    directory under it whose training set is exactly those images, its test set the first 16),
    so a step's gradient is the mean over them whatever the shuffle."""
    x_all, y_all = test_set()
    xb, yb = x_all[:n], y_all[:n]
    d = workdir()
    data = os.path.join(d, "data")
    raw = np.round(xb[..., 0] * 255).astype(np.uint8)
    write_idx_dir(data, raw, yb, raw[:16], yb[:16])
    return xb, yb, d, data


def half_casts(dtype):
    """(r16, w16) for JAX emulations of a mixed precision (dtype: jnp.bfloat16 or
    jnp.float16): r16 is a 16-bit tensor of Keras, rounded forward and its gradient rounded
    backward (a cast's); w16 is a variable cast at use, its gradient kept float32 (mwtrain's
    choice: docs/mixed-precision.md)."""
    import jax

    def to16(x):
        return x.astype(dtype).astype("float32")

    @jax.custom_vjp
    def r16(x):
        return to16(x)

    r16.defvjp(lambda x: (r16(x), None), lambda _, g: (to16(g),))

    @jax.custom_vjp
    def w16(x):
        return to16(x)

    w16.defvjp(lambda x: (w16(x), None), lambda _, g: (g,))
    return r16, w16


def policy_cnn(policy, d):
    """The tutorial CNN built by Keras under a dtype policy (seed 3), compiled as mwtrain's and
    saved into d: (model, its .keras path, its flat initial weights, its non-trainable
    values). Checks that Keras gave every layer the policy."""
    keras.utils.set_random_seed(3)
    keras.config.set_dtype_policy(policy)
    model = compile_like_mwtrain(tutorial_cnn())
    keras.config.set_dtype_policy("float32")
    path = os.path.join(d, f"{policy}.keras")
    model.save(path)
    check(all(layer.dtype_policy.name == policy for layer in model.layers),
          f"Keras built every layer with {policy}")
    return model, path, flat_weights(model), [v.value for v in model.non_trainable_variables]
