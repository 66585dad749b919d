"""TensorFlow peer for mwtrain's bfloat16 training-throughput benchmark on the CPU.

The tutorial CNN in Keras 3 on its TensorFlow backend (NHWC; Conv2D(32, 3, relu), MaxPool,
Conv2D(64, 3, relu), MaxPool, Flatten, Dense(64, relu), Dense(10) logits), trained with
Adam(1e-3) and from-logits sparse cross-entropy, batch 64, under a Keras dtype policy:

  $(tests/bench/tf_venv.sh BUILD) tests/bench/peer_tf.py --policy float32|mixed_bfloat16
      [--threads N] [--steps N] [--batch B] [--data-dir DIR]

--policy is set with keras.mixed_precision.set_global_policy before the model is built, so
every layer (the last Dense too) computes in it with float32 variables; the loss casts the
logits to float32, as Keras does. mixed_bfloat16 needs no loss scaling. The script asserts
that the built layers really compute in the policy's dtype, so an ignored policy fails.

--threads sets TensorFlow's intra-op pool (inter-op is 1). Data: the first 60000 or fewer
Fashion-MNIST training images (uint8 / 255, no shuffle, repeated as needed) from DIR's IDX
files, or random uint8-like images of that shape when they are absent. model.fit runs two
epochs of --steps steps each; the first traces the step and warms up, the second is timed.
On a CPU-only machine Keras' jit_compile="auto" leaves XLA off, so TensorFlow's own kernels
(oneDNN where it is built in) do the work; ONEDNN_VERBOSE=1 shows which ones.

The last line printed is

  images_per_sec=<steps x batch / seconds> policy=<name> tf=<version> isa_bf16=<0|1>

where isa_bf16 says whether /proc/cpuinfo lists avx512_bf16 or amx_bf16.
"""
import argparse
import gzip
import os
import sys
import time

os.environ["KERAS_BACKEND"] = "tensorflow"
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import keras  # noqa: E402

DEFAULT_DATA = "/usr/share/datasets/fashion-mnist"
SEED = 1


def isa_bf16():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    return int(bool(flags & {"avx512_bf16", "amx_bf16"}))
    except OSError:
        pass
    return 0


def fashion(data_dir, n):
    """The first n (<= 60000) training images as float32 in [0, 1] and int32 labels."""
    xp = os.path.join(data_dir, "train-images-idx3-ubyte.gz")
    yp = os.path.join(data_dir, "train-labels-idx1-ubyte.gz")
    if os.path.exists(xp) and os.path.exists(yp):
        with gzip.open(xp) as f:
            x = np.frombuffer(f.read()[16:16 + n * 784], np.uint8)
        with gzip.open(yp) as f:
            y = np.frombuffer(f.read()[8:8 + n], np.uint8)
        n = min(len(x) // 784, len(y))
        x, y = x[:n * 784], y[:n]
    else:
        rng = np.random.default_rng(SEED)
        x = rng.integers(0, 256, n * 784, dtype=np.uint8)
        y = rng.integers(0, 10, n, dtype=np.uint8)
    return x.reshape(n, 28, 28, 1).astype(np.float32) / np.float32(255), y.astype(np.int32)


def cnn():
    L = keras.layers
    return keras.Sequential([
        keras.Input((28, 28, 1)),
        L.Conv2D(32, 3, activation="relu"),
        L.MaxPooling2D(),
        L.Conv2D(64, 3, activation="relu"),
        L.MaxPooling2D(),
        L.Flatten(),
        L.Dense(64, activation="relu"),
        L.Dense(10),
    ])


def check_policy(model, policy):
    want = "bfloat16" if policy == "mixed_bfloat16" else "float32"
    for layer in model.layers:
        assert layer.compute_dtype == want, \
            "%s computes in %s, not %s" % (layer.name, layer.compute_dtype, want)
        assert layer.variable_dtype == "float32", \
            "%s keeps %s variables" % (layer.name, layer.variable_dtype)
    out = model(np.zeros((1, 28, 28, 1), np.float32))
    assert out.dtype == want, "logits are %s, not %s" % (out.dtype, want)


class EpochTimer(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.seconds = []

    def on_epoch_begin(self, epoch, logs=None):
        self.t0 = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        self.seconds.append(time.perf_counter() - self.t0)


def main():
    ap = argparse.ArgumentParser(description="TensorFlow peer: CNN training throughput")
    ap.add_argument("--policy", choices=("float32", "mixed_bfloat16"), default="float32")
    ap.add_argument("--threads", type=int, default=1, help="TensorFlow intra-op threads")
    ap.add_argument("--steps", type=int, default=200, help="steps per epoch (2 epochs)")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--data-dir", default=DEFAULT_DATA)
    a = ap.parse_args()
    if a.threads < 1 or a.steps < 1 or a.batch < 1:
        ap.error("--threads, --steps and --batch must be >= 1")

    tf.config.threading.set_intra_op_parallelism_threads(a.threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    keras.utils.set_random_seed(SEED)
    keras.mixed_precision.set_global_policy(a.policy)

    x, y = fashion(a.data_dir, min(60000, 2 * a.steps * a.batch))
    ds = (tf.data.Dataset.from_tensor_slices((x, y)).repeat()
          .batch(a.batch, drop_remainder=True).prefetch(2))

    model = cnn()
    check_policy(model, a.policy)
    model.compile(optimizer=keras.optimizers.Adam(1e-3),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    timer = EpochTimer()
    model.fit(ds, steps_per_epoch=a.steps, epochs=2, verbose=0, callbacks=[timer])
    print("images_per_sec=%.1f policy=%s tf=%s isa_bf16=%d"
          % (a.steps * a.batch / timer.seconds[1], a.policy, tf.__version__, isa_bf16()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
