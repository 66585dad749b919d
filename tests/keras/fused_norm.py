"""The residual Add fused with the normalization of its sum, BatchNormalization fused with the
ReLU after it, and Dense fused with the activation that reads its output (worker/model/plan.c:
plan_fusion, an execution detail), train to the same bits as the unfused layers (suite 'keras', the oracle's venv: tests/keras/fused_norm.sh). Keras
3.15 only builds the archives; the oracle here is mwtrain itself with MW_FUSE=0, which runs Add,
then the norm, then in the backward the norm's input gradient into the sum's and Add's into both
inputs (the normalization, then the ReLU in place; the ReLU's backward, then the
normalization's; Dense, then its activation). The fused kernels compute the same rows in the
same order (kernels/layernorm_rules.h, rmsnorm_rules.h; bn_relu_* of kernels/kernel_list.h;
dense_act_fwd, on the CPU the two layers' kernels in turn), so the weights after 3 Adam steps
must be equal bitwise, not within a tolerance. Every Dense(tanh) below is a fused pair too. Models (Functional, token ids
of 6 steps -> Embedding(20, 16) -> x, labels per step):
  - post-norm (BERT's): x -> Dense -> Add(x, .) -> LayerNormalization -> Dense -> Add ->
    LayerNormalization(center=False, scale=False): one without gamma and beta;
  - pre-norm (GPT-2's, Llama's): the sum feeds the next block's norm AND the next residual Add:
    x -> Dense -> h; LayerNormalization(h) -> Dense -> Add(h, .) -> RMSNormalization -> Dense ->
    Add -> LayerNormalization(rms_scaling=True), with 1 thread and with 2;
  - Add(h, h) -> LayerNormalization: both Add inputs' gradients in one buffer;
  - Dense's activations: Dense(relu) (the ReLU in place), Dense -> ReLU(6), Dense -> z and
    Activation("gelu") -> Add(gelu(z), z) (z kept: the Add reads it too), Dense -> LeakyReLU,
    and Dense -> ReLU(threshold=0.05), which stays unfused (relux_fwd's threshold);
and on 8x8x3 images, a class each:
  - MobileNetV2's: Conv2D -> BatchNormalization -> ReLU(6) -> DepthwiseConv2D ->
    BatchNormalization -> ReLU(6) -> Conv2D -> BatchNormalization (no ReLU) -> Add with the first
    ReLU's output, with 1 thread and with 2;
  - ResNet's: Conv2D -> BatchNormalization -> Activation("relu") -> Conv2D ->
    BatchNormalization(center=False, scale=False) -> ReLU(); and a BatchNormalization read by a
    ReLU and by an Add, which stays unfused (its output is not the ReLU's alone).
Each run with --verbose names the fused pairs: the count per model is asserted (and none with
MW_FUSE=0), so the comparison is not of two unfused runs. Control: the unfused run with another
learning rate differs (the comparison can fail).

usage: fused_norm.py MWTRAIN WORKDIR"""
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from oracle import check, finish  # noqa: E402  (imports Keras)
import keras  # noqa: E402

T, C, K, N = 6, 16, 3, 64  # 16 test examples, 3 steps of 16 (train)


def dense(x, name):
    return keras.layers.Dense(C, activation="tanh", name=name)(x)


def embedded():
    ids = keras.Input((T,), dtype="int32")
    return ids, keras.layers.Embedding(20, C, name="emb")(ids)


def post_norm():
    ids, x = embedded()
    a = keras.layers.LayerNormalization(name="ln1")(keras.layers.Add()([x, dense(x, "d1")]))
    b = keras.layers.Add()([a, dense(a, "d2")])
    b = keras.layers.LayerNormalization(center=False, scale=False, name="ln2")(b)
    return keras.Model(ids, keras.layers.Dense(K, name="head")(b)), 4


def pre_norm():
    ids, x = embedded()
    h = dense(x, "d0")
    a = keras.layers.Add()([h, dense(keras.layers.LayerNormalization(name="ln0")(h), "d1")])
    b = keras.layers.Add()([a, dense(keras.layers.RMSNormalization(name="rms")(a), "d2")])
    out = keras.layers.LayerNormalization(rms_scaling=True, name="lnr")(b)
    return keras.Model(ids, keras.layers.Dense(K, name="head")(out)), 5


def self_add():
    ids, x = embedded()
    h = dense(x, "d0")
    a = keras.layers.LayerNormalization(name="ln")(keras.layers.Add()([h, h]))
    return keras.Model(ids, keras.layers.Dense(K, name="head")(a)), 2


def dense_acts():
    ids, x = embedded()
    a = keras.layers.Dense(C, activation="relu", name="dr")(x)
    b = keras.layers.ReLU(6.0, name="r6")(keras.layers.Dense(C, name="d6")(a))
    z = keras.layers.Dense(C, name="dz")(b)
    c = keras.layers.Add()([keras.layers.Activation("gelu", name="g")(z), z])
    d = keras.layers.LeakyReLU(0.1, name="lk")(keras.layers.Dense(C, name="dl")(c))
    e = keras.layers.ReLU(threshold=0.05, name="rt")(keras.layers.Dense(C, name="dt")(d))
    return keras.Model(ids, keras.layers.Dense(K, name="head")(e)), 4


def mobilenet():
    img = keras.Input((8, 8, 3))
    a = keras.layers.Conv2D(8, 3, padding="same", use_bias=False, name="c0")(img)
    a = keras.layers.ReLU(6.0, name="r0")(keras.layers.BatchNormalization(name="bn0")(a))
    b = keras.layers.DepthwiseConv2D(3, padding="same", use_bias=False, name="dw")(a)
    b = keras.layers.ReLU(6.0, name="r1")(keras.layers.BatchNormalization(name="bn1")(b))
    b = keras.layers.BatchNormalization(name="bn2")(keras.layers.Conv2D(8, 1, name="pw")(b))
    out = keras.layers.GlobalAveragePooling2D()(keras.layers.Add()([a, b]))
    return keras.Model(img, keras.layers.Dense(K, name="head")(out)), 2


def resnet():
    img = keras.Input((8, 8, 3))
    a = keras.layers.BatchNormalization(name="bn0")(keras.layers.Conv2D(8, 3, name="c0")(img))
    a = keras.layers.Activation("relu", name="r0")(a)
    b = keras.layers.Conv2D(8, 3, padding="same", name="c1")(a)
    b = keras.layers.BatchNormalization(center=False, scale=False, name="bn1")(b)
    b = keras.layers.ReLU(name="r1")(b)
    c = keras.layers.BatchNormalization(name="bn2")(keras.layers.Conv2D(8, 1, name="c2")(b))
    c = keras.layers.Add()([keras.layers.ReLU(name="r2")(c), c])
    out = keras.layers.GlobalAveragePooling2D()(c)
    return keras.Model(img, keras.layers.Dense(K, name="head")(out)), 2


def train(mw, work, tag, model, data, threads, fuse, lr="0.01"):
    """mwtrain's weights after 3 Adam steps (bytes), and the fused pairs it named."""
    out = os.path.join(work, tag + ".bin")
    env = dict(os.environ, MW_FUSE="1" if fuse else "0")
    r = subprocess.run([mw, "train", "--model", model, "--data", data, "--epochs", "1",
                        "--batch-per-replica", "16", "--threads", str(threads), "--no-shuffle",
                        "--optimizer", "adam", "--learning-rate", lr, "--test-examples", "16",
                        "--summary-dir", "", "--checkpoint-every-epochs", "0", "--progress",
                        "none", "--checkpoint-dir", os.path.join(work, tag + "-ck"),
                        "--dump-weights", out, "--verbose"], capture_output=True, text=True,
                       env=env)
    if not check(r.returncode == 0, "%s: exit %d%s" % (tag, r.returncode, "\n" +
                                                        r.stderr[-600:] if r.returncode else "")):
        return None, 0
    with open(out, "rb") as f:  # the model is planned more than once: its distinct lines
        return f.read(), len({s for s in r.stderr.splitlines() if "runs fused with" in s})


def main():
    mw, work = sys.argv[1], sys.argv[2]
    rng = np.random.default_rng(7)
    data = os.path.join(work, "d.npz")
    x = rng.integers(0, 20, size=(N, T)).astype(np.int32)
    y = rng.integers(0, K, size=(N, T)).astype(np.int32)
    np.savez(data, x_train=x[16:], y_train=y[16:], x_test=x[:16], y_test=y[:16])
    images = os.path.join(work, "i.npz")
    xi = rng.uniform(0.0, 1.0, size=(N, 8, 8, 3)).astype(np.float32)
    yi = rng.integers(0, K, size=N).astype(np.int32)
    np.savez(images, x_train=xi[16:], y_train=yi[16:], x_test=xi[:16], y_test=yi[:16])
    for name, make, threads in [("post-norm", post_norm, 1), ("pre-norm", pre_norm, 1),
                                ("pre-norm", pre_norm, 2), ("Add(h, h)", self_add, 1),
                                ("Dense+act", dense_acts, 1), ("Dense+act", dense_acts, 2),
                                ("BN+ReLU6", mobilenet, 1), ("BN+ReLU6", mobilenet, 2),
                                ("BN+ReLU", resnet, 1)]:
        keras.utils.set_random_seed(3)
        model, pairs = make()
        path = os.path.join(work, name.replace(" ", "") + ".keras")
        model.save(path)
        tag = "%s-%d" % (name.replace(" ", ""), threads)
        d = images if make in (mobilenet, resnet) else data
        fused, nf = train(mw, work, tag + "-fused", path, d, threads, True)
        plain, np_ = train(mw, work, tag + "-plain", path, d, threads, False)
        if fused is None or plain is None:
            continue
        check(nf == pairs and np_ == 0, "%s, %d thread(s): %d pairs fused (expected %d), %d "
              "with MW_FUSE=0" % (name, threads, nf, pairs, np_))
        check(fused == plain, "%s, %d thread(s): fused and unfused weights equal bitwise "
              "(%d bytes)" % (name, threads, len(plain)))
        other, _ = train(mw, work, tag + "-control", path, d, threads, False, lr="0.02")
        check(other is not None and other != plain,
              "%s: control, learning rate 0.02 unfused: the weights differ" % name)
    finish()


main()
