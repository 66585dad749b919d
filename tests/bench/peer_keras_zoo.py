"""Keras peer for mwtrain's keras.applications training-speed benchmark (bench_zoo_speed.sh).

  python peer_keras_zoo.py save NAME SIZE OUT.keras
      keras.applications.NAME(weights=None, classes=10, input_shape=(SIZE, SIZE, 3)) compiled
      with SGD(0.01) and sparse categorical cross-entropy (on the softmax the model ends in),
      saved as a .keras archive. The last line printed is

      peer_keras saved=<OUT> trainable=<parameters> train_gflop_per_image=<G>

      G is the matrix work of one training image: 2 x the multiply-adds of every Conv2D,
      DepthwiseConv2D and Dense (output positions x kernel x input channels per group x
      filters) for the forward, the same again for the weight gradients and for the input
      gradients, less the input gradient of the layers that read the model's input or
      parameter-free layers of it alone (ResNet50's padding before its first convolution):
      nobody needs it. Batch normalization, activations, pooling and additions are not
      counted.
  python peer_keras_zoo.py data OUT.npz --size S --examples N
      N random uint8 images (S, S, 3) and labels 0..9 (each class equally often, shuffled),
      plus 32 test examples, as a Keras-style .npz (x_train, y_train, x_test, y_test) that
      mwtrain --data, this peer and peer_torch_zoo.py read alike.
  python peer_keras_zoo.py time MODEL.keras DATA.npz --batch B --steps S --threads T
      model.fit on the archive with TensorFlow's intra-op pool at T threads (inter-op 1):
      consecutive batches of the .npz (uint8 / 255 as each batch is assembled, as mwtrain
      does), 2 epochs of S steps; the first traces the step and warms up, the second is
      timed. The model is compiled anew with SGD(0.01) and sparse categorical cross-entropy
      and jit_compile="auto", what a user gets: Keras leaves XLA off on a CPU-only machine,
      so TensorFlow's own kernels (oneDNN) do the work. The last line printed is

      peer_keras images_per_sec=<S x B / seconds> batch=<B> steps=<S> threads=<T> xla=<0|1>
          tf=<version> keras=<version>

Run with tests/bench/tf_venv.sh's python (Keras 3.15 on TensorFlow 2.21).
"""
import argparse
import os
import sys
import time
import warnings

os.environ["KERAS_BACKEND"] = "tensorflow"
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import keras  # noqa: E402

SEED = 1


def train_flop_per_image(model):
    total = 0
    # tensors no gradient reaches: the input, and what parameter-free layers make of it alone
    constant = {id(t) for t in model.inputs}
    for layer in model.layers:
        inp, out = layer.input, layer.output
        ins = inp if isinstance(inp, (list, tuple)) else [inp]
        if not layer.weights and all(id(t) in constant for t in ins):
            constant.add(id(out))
        kind = type(layer).__name__
        if kind not in ("Conv2D", "DepthwiseConv2D", "Dense"):
            continue
        cin = inp.shape[-1]
        if kind == "Dense":
            macs = cin * layer.units
        elif kind == "Conv2D":
            kh, kw = layer.kernel_size
            macs = out.shape[1] * out.shape[2] * kh * kw * (cin // layer.groups) * layer.filters
        else:
            kh, kw = layer.kernel_size
            macs = out.shape[1] * out.shape[2] * kh * kw * cin * layer.depth_multiplier
        passes = 2 if id(inp) in constant else 3
        total += passes * 2 * macs
    return total


def save(a):
    keras.utils.set_random_seed(SEED)
    with warnings.catch_warnings():  # "input_shape is not one of the sizes with weights"
        warnings.simplefilter("ignore")
        m = getattr(keras.applications, a.name)(
            weights=None, classes=10, input_shape=(a.size, a.size, 3))
    m.compile(optimizer=keras.optimizers.SGD(0.01), loss="sparse_categorical_crossentropy")
    m.save(a.out)
    trainable = sum(int(np.prod(w.shape)) for w in m.trainable_weights)
    print("peer_keras saved=%s trainable=%d train_gflop_per_image=%.4f"
          % (a.out, trainable, train_flop_per_image(m) / 1e9))


def data(a):
    rng = np.random.default_rng(SEED)

    def part(n):
        x = rng.integers(0, 256, (n, a.size, a.size, 3), dtype=np.uint8)
        return x, rng.permutation(np.arange(n) % 10).astype(np.uint8)

    x, y = part(a.examples)
    xt, yt = part(32)
    np.savez(a.out, x_train=x, y_train=y, x_test=xt, y_test=yt)


class EpochTimer(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.seconds = []

    def on_epoch_begin(self, epoch, logs=None):
        self.t0 = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        self.seconds.append(time.perf_counter() - self.t0)


def timed(a):
    tf.config.threading.set_intra_op_parallelism_threads(a.threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    keras.utils.set_random_seed(SEED)
    with np.load(a.data) as d:
        x, y = d["x_train"], d["y_train"].astype(np.int32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = keras.models.load_model(a.model, compile=False)
    m.compile(optimizer=keras.optimizers.SGD(0.01), loss="sparse_categorical_crossentropy")
    ds = (tf.data.Dataset.from_tensor_slices((x, y)).repeat()
          .batch(a.batch, drop_remainder=True)
          .map(lambda u, v: (tf.cast(u, tf.float32) / 255.0, v)).prefetch(2))
    timer = EpochTimer()
    m.fit(ds, steps_per_epoch=a.steps, epochs=2, verbose=0, callbacks=[timer])
    print("peer_keras images_per_sec=%.2f batch=%d steps=%d threads=%d xla=%d tf=%s keras=%s"
          % (a.steps * a.batch / timer.seconds[1], a.batch, a.steps, a.threads,
             int(bool(m.jit_compile)), tf.__version__, keras.__version__))


def main():
    ap = argparse.ArgumentParser(description="Keras peer: keras.applications training speed")
    sub = ap.add_subparsers(dest="what", required=True)
    s = sub.add_parser("save")
    s.add_argument("name")
    s.add_argument("size", type=int)
    s.add_argument("out")
    d = sub.add_parser("data")
    d.add_argument("out")
    d.add_argument("--size", type=int, required=True)
    d.add_argument("--examples", type=int, required=True)
    t = sub.add_parser("time")
    t.add_argument("model")
    t.add_argument("data")
    t.add_argument("--batch", type=int, default=32)
    t.add_argument("--steps", type=int, default=10)
    t.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    {"save": save, "data": data, "time": timed}[a.what](a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
