"""Keras peer for mwtrain's ResNet-20 benchmark (tests/bench/bench_resnet.sh).

  python peer_keras_resnet.py save OUT.keras [--synchronized]
      the ResNet-20 v1 of tests/keras/parity/parity.py (CIFAR-style, 3 stages of 16/32/64
      filters, BatchNormalization, Add, GlobalAveragePooling2D) for 28x28x1 inputs, compiled
      with Adam(1e-3) and from-logits sparse cross-entropy, saved as a .keras archive;
      --synchronized sets every BatchNormalization's synchronized flag in the archive's
      config.json afterwards (Keras builds that flag only on its TensorFlow backend; the
      weights are the same either way), for mwtrain only;
  python peer_keras_resnet.py time MODEL.keras --batch B --steps S [--warmup W]
      trains that archive with model.fit on consecutive batches of Fashion-MNIST (uint8 / 255,
      no shuffle) in this process: W untimed steps (XLA compiles the step), then S timed ones.
      The last line printed is

      peer_keras images_per_sec=<S x B / seconds> batch=<B> steps=<S> backend=<backend>

Run under KERAS_BACKEND=jax JAX_PLATFORMS=cpu (tests/keras/venv.sh's environment); XLA's CPU
thread pool takes the machine's cores, so mwtrain runs against it with as many threads in all.
"""
import argparse
import gzip
import json
import os
import sys
import time
import warnings
import zipfile

os.environ.setdefault("KERAS_BACKEND", "jax")
import keras  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "keras", "parity"))
import parity  # noqa: E402

DATA = "/usr/share/datasets/fashion-mnist"


def fashion(n):
    with gzip.open(os.path.join(DATA, "train-images-idx3-ubyte.gz")) as f:
        x = np.frombuffer(f.read()[16:16 + n * 784], np.uint8)
    with gzip.open(os.path.join(DATA, "train-labels-idx1-ubyte.gz")) as f:
        y = np.frombuffer(f.read()[8:8 + n], np.uint8)
    return x.reshape(n, 28, 28, 1).astype(np.float32) / np.float32(255), y.astype(np.int32)


def synchronize(path):
    """Rewrite the archive with synchronized: true in every BatchNormalization's config."""
    with zipfile.ZipFile(path) as z:
        files = {n: z.read(n) for n in z.namelist()}
    cfg = json.loads(files["config.json"])
    bns = [l for l in cfg["config"]["layers"] if l["class_name"] == "BatchNormalization"]
    assert bns, "no BatchNormalization layer"
    for l in bns:
        l["config"]["synchronized"] = True
    files["config.json"] = json.dumps(cfg).encode()
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for n, b in files.items():
            z.writestr(n, b)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["save", "time"])
    ap.add_argument("path")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--synchronized", action="store_true")
    a = ap.parse_args()
    if a.what == "save":
        keras.utils.set_random_seed(1)
        m = parity.resnet20()
        m.compile(optimizer=keras.optimizers.Adam(1e-3),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        m.save(a.path)
        if a.synchronized:
            synchronize(a.path)
        print("saved %s: %d parameters" % (a.path, m.count_params()))
        return 0
    with warnings.catch_warnings():  # the archive holds no optimizer variables yet: says so
        warnings.simplefilter("ignore")
        m = keras.models.load_model(a.path)
    x, y = fashion((a.warmup + a.steps) * a.batch)
    w = a.warmup * a.batch
    m.fit(x[:w], y[:w], batch_size=a.batch, epochs=1, shuffle=False, verbose=0)
    t0 = time.perf_counter()
    m.fit(x[w:], y[w:], batch_size=a.batch, epochs=1, shuffle=False, verbose=0)
    dt = time.perf_counter() - t0
    print("peer_keras images_per_sec=%.1f batch=%d steps=%d backend=%s"
          % (a.steps * a.batch / dt, a.batch, a.steps, keras.backend.backend()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
