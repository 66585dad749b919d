"""Parity with real Keras 3: logits, loss, every gradient and BatchNormalization's updated
moving statistics of one training step, mwtrain (parity_driver) against Keras (JAX).

    parity.py DRIVER WORKDIR

For each model Keras builds it (its own initial weights; BN's gamma, beta and moving
statistics are then randomized so they are not the trivial 1/0/0/1), writes model.to_json(),
the weights in model.weights order (mwtrain's arena order), a batch of 16 images and labels,
computes the step with model.stateless_call(training=True) and jax.value_and_grad, runs the
driver (kernel tables cpu and ref) and compares. Error of a tensor: max |mw - keras| /
max |keras| (relative to the tensor's scale); the loss: |mw - keras| / |keras|. A gradient
tensor whose Keras values all lie below 1e-3 of the model's largest gradient is measured
against that largest gradient instead: the bias of a layer that BatchNormalization follows
has a gradient of 0 in exact arithmetic (BN removes the mean), so both sides hold rounding
noise there (the table counts these tensors). Every worst error must be under 1e-4. Dropout's rate is 0 on both sides (the masks come from different
generators; dropout has its own tests).
"""
import os
import subprocess
import sys

os.environ.setdefault("KERAS_BACKEND", "jax")
# the driver (mwtrain's kernels) runs under the ISA cap the test run asked for (parity.sh)
DRIVER_ENV = dict(os.environ)
if os.environ.get("MW_DRIVER_ONEDNN_MAX_CPU_ISA"):
    DRIVER_ENV["ONEDNN_MAX_CPU_ISA"] = os.environ["MW_DRIVER_ONEDNN_MAX_CPU_ISA"]
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import keras  # noqa: E402
import numpy as np  # noqa: E402
from keras import layers  # noqa: E402

TOL = 1e-4
N = 16


def tutorial_cnn():
    return keras.Sequential([
        keras.Input((28, 28, 1)),
        layers.Conv2D(32, 3, activation="relu"),
        layers.MaxPooling2D(),
        layers.Conv2D(64, 3, activation="relu"),
        layers.MaxPooling2D(),
        layers.Flatten(),
        layers.Dense(64, activation="relu"),
        layers.Dense(10),
    ], name="tutorial_cnn")


def resnet20():
    """ResNet-20 v1, CIFAR-style (He et al. 2016): 3 stages of 3 basic blocks, 16/32/64."""
    inp = keras.Input((28, 28, 1))
    x = layers.Conv2D(16, 3, padding="same", use_bias=False, kernel_initializer="he_normal")(inp)
    x = layers.BatchNormalization()(x)
    x = layers.Activation("relu")(x)
    for stage, filters in enumerate([16, 32, 64]):
        for block in range(3):
            stride = 2 if stage > 0 and block == 0 else 1
            y = layers.Conv2D(filters, 3, strides=stride, padding="same", use_bias=False,
                              kernel_initializer="he_normal")(x)
            y = layers.BatchNormalization()(y)
            y = layers.Activation("relu")(y)
            y = layers.Conv2D(filters, 3, padding="same", use_bias=False,
                              kernel_initializer="he_normal")(y)
            y = layers.BatchNormalization()(y)
            if stride != 1 or x.shape[-1] != filters:
                x = layers.Conv2D(filters, 1, strides=stride, padding="same",
                                  kernel_initializer="he_normal")(x)
            x = layers.Add()([x, y])
            x = layers.Activation("relu")(x)
    x = layers.GlobalAveragePooling2D()(x)
    out = layers.Dense(10)(x)
    return keras.Model(inp, out, name="resnet20")


def vgg_bn():
    inp = keras.Input((28, 28, 1))
    x = inp
    for filters in (32, 64):
        for _ in range(2):
            x = layers.Conv2D(filters, 3, padding="same")(x)
            x = layers.BatchNormalization()(x)
            x = layers.Activation("relu")(x)
        x = layers.MaxPooling2D()(x)
        x = layers.Dropout(0.25)(x)
    x = layers.Flatten()(x)
    x = layers.Dense(128)(x)
    x = layers.BatchNormalization()(x)
    x = layers.Activation("relu")(x)
    x = layers.Dropout(0.5)(x)
    out = layers.Dense(10)(x)
    return keras.Model(inp, out, name="vgg_bn")


def mlp():
    return keras.Sequential([
        keras.Input((28, 28, 1)),
        layers.Flatten(),
        layers.Dense(128, activation="relu"),
        layers.Dense(64, activation="relu"),
        layers.Dense(10),
    ], name="mlp")


def zoo():
    """Every other new layer and activation once: padding, strides without bias, average
    pooling with 'same' padding, the smooth activations, Multiply, Concatenate, a softmax
    in the middle, BN without center or scale, global max pooling. Convolutions that feed a
    BN through a nonlinearity have no bias: that bias's gradient is a near-total
    cancellation, float32 noise on both sides."""
    inp = keras.Input((28, 28, 1))
    x = layers.ZeroPadding2D(((1, 2), (0, 1)))(inp)
    x = layers.Conv2D(8, 3, strides=2, use_bias=False, activation="gelu")(x)
    a = layers.Conv2D(8, 3, padding="same", activation="sigmoid")(x)
    b = layers.Conv2D(8, 3, padding="same", use_bias=False, activation="tanh")(x)
    m = layers.Multiply()([a, b])
    c = layers.Concatenate()([m, x, layers.Activation("silu")(x)])
    c = layers.BatchNormalization(center=False)(c)
    c = layers.AveragePooling2D(3, strides=2, padding="same")(c)
    d = layers.Conv2D(12, 3, padding="same", use_bias=False, activation="elu")(c)
    d = layers.LeakyReLU()(d)
    d = layers.Activation("leaky_relu")(d)
    e = layers.Activation("softmax")(d)
    g = layers.BatchNormalization(scale=False, momentum=0.9)(d)
    f = layers.Add()([layers.GlobalMaxPooling2D()(e), layers.GlobalAveragePooling2D()(g)])
    f = layers.Dense(16, activation="swish")(f)
    f = layers.BatchNormalization()(f)
    out = layers.Dense(10)(f)
    return keras.Model(inp, out, name="zoo")


def crop():
    """Cropping2D in its three config forms, two crops of one tensor added (their gradients
    add up in it), a crop of the model's input."""
    inp = keras.Input((28, 28, 1))
    x = layers.Cropping2D(((2, 1), (0, 3)))(inp)
    x = layers.Conv2D(8, 3, strides=2, activation="relu")(x)
    a = layers.Cropping2D(((1, 0), (2, 1)))(x)
    b = layers.Cropping2D(((0, 1), (0, 3)))(x)
    y = layers.Conv2D(8, 3, padding="same", activation="tanh")(layers.Add()([a, b]))
    y = layers.Cropping2D(1)(y)
    y = layers.Cropping2D((2, 0))(y)
    out = layers.Dense(10)(layers.Flatten()(y))
    return keras.Model(inp, out, name="crop")


def randomize_bn(model, rng):
    for layer in model.layers:
        if isinstance(layer, layers.BatchNormalization):
            new = []
            for w in layer.weights:
                v = np.asarray(w.value)
                if "variance" in w.path:
                    new.append(rng.uniform(0.5, 1.5, v.shape).astype(np.float32))
                elif "gamma" in w.path:
                    new.append(rng.uniform(0.5, 1.5, v.shape).astype(np.float32))
                else:
                    new.append(rng.uniform(-0.5, 0.5, v.shape).astype(np.float32))
            layer.set_weights(new)
        if isinstance(layer, layers.Dropout):
            layer.rate = 0.0


def keras_step(model, x, y):
    tv = [v.value for v in model.trainable_variables]
    ntv = [v.value for v in model.non_trainable_variables]

    def f(tv, ntv):
        logits, ntv2 = model.stateless_call(tv, ntv, x, training=True)
        loss = jnp.mean(keras.losses.sparse_categorical_crossentropy(y, logits, from_logits=True))
        return loss, (logits, ntv2)

    (loss, (logits, ntv2)), g = jax.value_and_grad(f, has_aux=True)(tv, ntv)
    return float(loss), np.asarray(logits), [np.asarray(t) for t in g], \
        [np.asarray(t) for t in ntv2]


def err(a, b, floor=1e-30):
    scale = float(np.max(np.abs(b))) if b.size else 0.0
    return float(np.max(np.abs(a - b))) / max(scale, floor) if b.size else 0.0


def check(model, driver, work, rng):
    d = os.path.join(work, model.name)
    os.makedirs(d, exist_ok=True)
    randomize_bn(model, rng)
    with open(os.path.join(d, "model.json"), "w") as f:
        f.write(model.to_json())
    flat = np.concatenate([np.asarray(w.value, np.float32).ravel() for w in model.weights])
    flat.tofile(os.path.join(d, "params.f32"))
    x = rng.uniform(0, 1, (N, 28, 28, 1)).astype(np.float32)
    y = rng.integers(0, 10, N).astype(np.int32)
    x.tofile(os.path.join(d, "x.f32"))
    y.tofile(os.path.join(d, "y.i32"))
    loss, logits, grads, ntv2 = keras_step(model, x, y)
    tid = {id(v): i for i, v in enumerate(model.trainable_variables)}
    nid = {id(v): i for i, v in enumerate(model.non_trainable_variables)}
    worst = {"logits": 0.0, "loss": 0.0, "grads": 0.0, "stats": 0.0}
    gmax = max(float(np.max(np.abs(t))) for t in grads)
    zeros = set()
    for backend in ("cpu", "ref"):
        subprocess.run([driver, d, backend], check=True, env=DRIVER_ENV)
        mw_logits = np.fromfile(os.path.join(d, "out_logits.f32"), np.float32)
        mw_loss = float(np.fromfile(os.path.join(d, "out_loss.f64"), np.float64)[0])
        mw_grads = np.fromfile(os.path.join(d, "out_grads.f32"), np.float32)
        mw_params = np.fromfile(os.path.join(d, "out_params.f32"), np.float32)
        worst["logits"] = max(worst["logits"], err(mw_logits, logits.ravel()))
        worst["loss"] = max(worst["loss"], abs(mw_loss - loss) / abs(loss))
        off = 0
        for w in model.weights:
            n = int(np.prod(w.shape))
            if id(w) in tid:
                g = grads[tid[id(w)]].ravel()
                if float(np.max(np.abs(g))) < 1e-3 * gmax:
                    zeros.add(w.path)
                e = err(mw_grads[off:off + n], g, gmax if w.path in zeros else 1e-30)
                worst["grads"] = max(worst["grads"], e)
                if e > TOL:
                    print(f"  {model.name} {backend}: gradient of {w.path}: error {e:.3g}")
            else:
                e = err(mw_params[off:off + n], ntv2[nid[id(w)]].ravel())
                worst["stats"] = max(worst["stats"], e)
                if e > TOL:
                    print(f"  {model.name} {backend}: updated {w.path}: error {e:.3g}")
            off += n
    worst["zeros"] = len(zeros)
    return flat.size, worst


def main():
    driver, work = sys.argv[1], sys.argv[2]
    keras.utils.set_random_seed(1)
    rng = np.random.default_rng(7)
    rows, bad = [], 0
    for make in (tutorial_cnn, resnet20, vgg_bn, mlp, zoo, crop):
        model = make()
        nparams, worst = check(model, driver, work, rng)
        rows.append((model.name, nparams, worst))
        bad += any(v > TOL for k, v in worst.items() if k != "zeros")
    print(f"{'model':<14} {'params':>8} {'logits':>10} {'loss':>10} {'gradients':>10} "
          f"{'moving stats':>12} {'zero grads':>10}")
    for name, nparams, w in rows:
        stats = f"{w['stats']:.2e}" if w["stats"] else "-"
        print(f"{name:<14} {nparams:>8} {w['logits']:>10.2e} {w['loss']:>10.2e} "
              f"{w['grads']:>10.2e} {stats:>12} {w['zeros']:>10}")
    print(f"worst relative errors against Keras {keras.__version__} (JAX), "
          f"tolerance {TOL:g}: {'FAIL' if bad else 'ok'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
