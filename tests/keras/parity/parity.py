"""Parity with real Keras 3: logits, loss, every gradient and BatchNormalization's updated
moving statistics of one training step, mwtrain (parity_driver) against Keras (JAX).

    parity.py DRIVER WORKDIR [MODEL...]

For each model Keras builds it (its own initial weights; BN's gamma, beta and moving
statistics are then randomized so they are not the trivial 1/0/0/1), writes model.to_json(),
the weights in model.weights order (mwtrain's arena order), a batch of 16 images and labels,
computes the step with model.stateless_call(training=True) and jax.value_and_grad, runs the
driver (kernel tables cpu and ref) and compares.

Keras computes the step in float64: the same model (its config with the float64 policy), the
same float32 weights and batch widened exactly. Its float32 step is not an oracle to 1e-4 on
every version: under Keras 3.15 (JAX 0.10) ResNet-20's float32 gradients lie 9.6e-3 from its
own float64 ones (mwtrain's: 3.6e-6), under Keras 3.6 within 1e-5. Against float64 the error is
mwtrain's own float32 rounding. A float64 step could make another decision than float32 at a
ReLU whose input lies within float32's rounding of 0, or at a max pooling's near-tie; none of
these models has one at 1e-4 (checked on both oracle versions). Error of a tensor: max |mw - keras| /
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

jax.config.update("jax_enable_x64", True)  # the float64 reference step
import jax.numpy as jnp  # noqa: E402
import keras  # noqa: E402
import numpy as np  # noqa: E402
from keras import layers  # noqa: E402
from keras.src.applications.convnext import LayerScale  # noqa: E402
from keras.src.applications.inception_resnet_v2 import CustomScaleLayer  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import numpy_draws  # noqa: E402

numpy_draws.install()  # initial weights drawn by numpy (tests/keras/numpy_draws.py)

TOL = 1e-4
N = 16
# A ReLU input within KINK_TAU of 0, relative to that ReLU's largest input, may be decided the
# other way by float32 rounding: a convolution's float32 sum of K <= 576 products of inputs
# and weights below that largest value errs by at most about sqrt(K) 2^-24 (1.4e-6) of it; 1e-5
# leaves room. At most KINK_MAX of them (the nearest to 0) are tried.
KINK_TAU = 1e-5
KINK_MAX = 24


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


def float64_twin(model):
    """The same model computing in float64, with the same weights widened exactly."""
    twin = keras.models.model_from_json(model.to_json().replace('"float32"', '"float64"'))
    twin.set_weights([np.asarray(w.value, np.float64) for w in model.weights])
    for layer in twin.layers:
        if isinstance(layer, layers.Dropout):
            layer.rate = 0.0
        if isinstance(layer, layers.Normalization):  # its computed statistics from the weights
            layer.finalize_state()
    return twin


def keras_step(model, x, y):
    tv = [v.value for v in model.trainable_variables]
    ntv = [v.value for v in model.non_trainable_variables]

    def f(tv, ntv):
        logits, ntv2 = model.stateless_call(tv, ntv, x, training=True)
        loss = jnp.mean(keras.losses.sparse_categorical_crossentropy(y, logits, from_logits=True))
        return loss, (logits, ntv2)

    (loss, (logits, ntv2)), g = jax.jit(jax.value_and_grad(f, has_aux=True))(tv, ntv)
    return float(loss), np.asarray(logits), [np.asarray(t) for t in g], \
        [np.asarray(t) for t in ntv2]


class Kinks:
    """Where float32 rounding may decide the other way in the float64 twin's step: ReLU inputs
    within KINK_TAU of 0, and max-pooling windows (2 x 2, stride 2) whose two largest inputs lie
    within KINK_TAU of each other (both relative to the largest input of that layer in the
    batch), the KINK_MAX nearest. flipped_grads(c) is the float64 step's gradients (the
    trainable variables', concatenated in model.weights order) with the decision at candidate c
    taken the other way (None: none)."""

    def __init__(self, twin, x, y):
        self.twin, self.x, self.y = twin, x, y
        self.flips, self._seen = None, {}
        for lay in twin.layers:
            if getattr(getattr(lay, "activation", None), "__name__", "") == "relu":
                lay.activation = self._relu(lay.name)
            elif (isinstance(lay, layers.MaxPooling2D) and lay.pool_size == (2, 2) and
                  lay.strides == (2, 2) and lay.padding == "valid"):
                lay.call = self._pool(lay.name)
        tv = [v.value for v in twin.trainable_variables]
        ntv = [v.value for v in twin.non_trainable_variables]
        twin.stateless_call(tv, ntv, x, training=True)  # records every decision's inputs
        cands, self.shapes = [], {}
        for name, (z, pool) in self._seen.items():
            top = float(np.max(np.abs(z)))
            if pool:  # the gap between the two largest of each window with a positive maximum
                s = np.sort(self._windows(z), axis=-1)
                near = (s[..., 3] - s[..., 2] < KINK_TAU * top) & (s[..., 3] > 0)
                dist = (s[..., 3] - s[..., 2]) / top
            else:
                near, dist = np.abs(z) < KINK_TAU * top, np.abs(z) / top
            self.shapes[name] = near.shape
            cands += [(float(dist[tuple(i)]), name, tuple(int(k) for k in i))
                      for i in np.argwhere(near)]
        self._seen = None
        self.cands = sorted(cands)[:KINK_MAX]
        self._step = jax.jit(self._grads)

    @staticmethod
    def _windows(z):
        n, h, w, c = z.shape
        z = z[:, :h // 2 * 2, :w // 2 * 2].reshape(n, h // 2, 2, w // 2, 2, c)
        return z.transpose(0, 1, 3, 5, 2, 4).reshape(n, h // 2, w // 2, c, 4)

    def _relu(self, name):
        def act(z):
            if self._seen is not None:
                self._seen[name] = (np.asarray(z), False)
            flip = self.flips[name] if self.flips is not None else False
            return jnp.where((z > 0) != flip, z, 0.0)
        return act

    def _pool(self, name):
        def call(inputs):
            if self._seen is not None:
                self._seen[name] = (np.asarray(inputs), True)
            s = jnp.sort(self._windows(inputs), axis=-1)
            if self.flips is None:
                return s[..., 3]
            return jnp.where(self.flips[name], s[..., 2], s[..., 3])
        return call

    def _grads(self, tv, ntv, flips):
        def f(tv):
            self.flips = flips
            logits, _ = self.twin.stateless_call(tv, ntv, self.x, training=True)
            return jnp.mean(keras.losses.sparse_categorical_crossentropy(self.y, logits,
                                                                         from_logits=True))
        g = jax.grad(f)(tv)
        self.flips = None
        return jnp.concatenate([t.ravel() for t in g])

    def flipped_grads(self, c):
        masks = {n: np.zeros(s, bool) for n, s in self.shapes.items()}
        if c is not None:
            _, name, idx = self.cands[c]
            masks[name][idx] = True
        tv = [v.value for v in self.twin.trainable_variables]
        ntv = [v.value for v in self.twin.non_trainable_variables]
        return np.asarray(self._step(tv, ntv, masks))


def err(a, b, floor=1e-30):
    scale = float(np.max(np.abs(b))) if b.size else 0.0
    return float(np.max(np.abs(a - b))) / max(scale, floor) if b.size else 0.0


def compare(d, model, step, zeros, gmax):
    """The worst errors of the driver's step in d against Keras' step of model, and the
    failing tensors."""
    loss, logits, grads, ntv2 = step
    tid = {id(v): i for i, v in enumerate(model.trainable_variables)}
    nid = {id(v): i for i, v in enumerate(model.non_trainable_variables)}
    mw_grads = np.fromfile(os.path.join(d, "out_grads.f32"), np.float32)
    mw_params = np.fromfile(os.path.join(d, "out_params.f32"), np.float32)
    mw_loss = float(np.fromfile(os.path.join(d, "out_loss.f64"), np.float64)[0])
    worst = {"logits": err(np.fromfile(os.path.join(d, "out_logits.f32"), np.float32),
                           logits.ravel()),
             "loss": abs(mw_loss - loss) / abs(loss), "grads": 0.0, "stats": 0.0}
    bad, off = [], 0
    for w in model.weights:
        n = int(np.prod(w.shape))
        if id(w) in tid:
            g = grads[tid[id(w)]].ravel()
            e = err(mw_grads[off:off + n], g, gmax if w.path in zeros else 1e-30)
            worst["grads"] = max(worst["grads"], e)
            what = "gradient of"
        else:
            e = err(mw_params[off:off + n], ntv2[nid[id(w)]].ravel())
            worst["stats"] = max(worst["stats"], e)
            what = "updated"
        if e > TOL:
            bad.append(f"{what} {w.path}: error {e:.3g}")
        off += n
    return worst, bad


def grad_error(twin, mw_grads, flat, zeros, gmax):
    """The worst gradient error of the driver's (model.weights order, every variable) against
    flat (the trainable variables' gradients concatenated), and the failing tensors."""
    trainable = {id(v) for v in twin.trainable_variables}
    worst, bad, off, k = 0.0, [], 0, 0
    for w in twin.weights:
        n = int(np.prod(w.shape))
        if id(w) in trainable:
            e = err(mw_grads[off:off + n], flat[k:k + n], gmax if w.path in zeros else 1e-30)
            worst = max(worst, e)
            if e > TOL:
                bad.append(f"gradient of {w.path}: error {e:.3g}")
            k += n
        off += n
    return worst, bad


def resolve_kinks(kinks, d, twin, zeros, gmax):
    """Greedily decide near-zero ReLU inputs the other way (Kinks) while that brings Keras'
    float64 gradients nearer the driver's; the errors then, and the candidates flipped."""
    mw_grads = np.fromfile(os.path.join(d, "out_grads.f32"), np.float32)
    cur = kinks.flipped_grads(None)
    deltas = [kinks.flipped_grads(c) - cur for c in range(len(kinks.cands))]
    worst, bad = grad_error(twin, mw_grads, cur, zeros, gmax)
    chosen = []
    while bad:
        tries = [(grad_error(twin, mw_grads, cur + dl, zeros, gmax), c)
                 for c, dl in enumerate(deltas) if c not in chosen]
        if not tries or min(tries)[0][0] >= worst:
            break
        (worst, bad), c = min(tries)
        chosen.append(c)
        cur = cur + deltas[c]
    return worst, bad, chosen


def check(model, driver, work, rng):
    """mwtrain's step (each kernel table) must equal Keras' float64 step within TOL on every
    tensor, the decisions float32 may take the other way (Kinks) resolved as the driver's."""
    d = os.path.join(work, model.name)
    os.makedirs(d, exist_ok=True)
    randomize_bn(model, rng)
    with open(os.path.join(d, "model.json"), "w") as f:
        f.write(model.to_json())
    flat = np.concatenate([np.asarray(w.value, np.float32).ravel() for w in model.weights])
    flat.tofile(os.path.join(d, "params.f32"))
    x = rng.uniform(0, 1, (N, 28, 28, 1)).astype(np.float32)
    # a class per example, or per pixel for a model whose output is an image (None, H, W, K)
    y = rng.integers(0, model.output_shape[-1], (N, *model.output_shape[1:-1])).astype(np.int32)
    x.tofile(os.path.join(d, "x.f32"))
    y.tofile(os.path.join(d, "y.i32"))
    twin = float64_twin(model)
    steps = {"float64": (twin, keras_step(twin, x.astype(np.float64), y))}
    grads = steps["float64"][1][2]
    gmax = max(float(np.max(np.abs(t))) for t in grads)
    zeros = {v.path for v, g in zip(twin.trainable_variables, grads)
             if float(np.max(np.abs(g))) < 1e-3 * gmax}
    worst, matched, kinks = {"logits": 0.0, "loss": 0.0, "grads": 0.0, "stats": 0.0}, [], None
    for backend in ("cpu", "ref"):
        subprocess.run([driver, d, backend], check=True, env=DRIVER_ENV)
        tries = {k: compare(d, m, s, zeros, gmax) for k, (m, s) in steps.items()}
        best = min(tries, key=lambda k: (len(tries[k][1]), max(tries[k][0].values())))
        matched.append(f"{backend}={best}")
        if tries[best][1] and all(b.startswith("gradient") for b in tries["float64"][1]):
            # only gradients differ: decisions at ReLU kinks, or an error
            kinks = kinks or Kinks(twin, x.astype(np.float64), y)
            g, bad, chosen = resolve_kinks(kinks, d, twin, zeros, gmax)
            best = "float64"
            tries[best][0]["grads"] = g
            tries[best] = (tries[best][0], bad)
            near = [f"{kinks.cands[c][0]:.1e}" for c in chosen]
            matched[-1] = (f"{backend}=float64 with {len(chosen)} of {len(kinks.cands)} near "
                           f"decisions the other way ({', '.join(near)})")
        for line in tries[best][1]:
            print(f"  {model.name} {backend} (against Keras' {best} step): {line}")
        for k, v in tries[best][0].items():
            worst[k] = max(worst[k], v)
    worst["zeros"] = len(zeros)
    worst["matched"] = " ".join(matched)
    return flat.size, worst


def act():
    """The activation classes the zoo reaches only through Activation(...): ELU, a Softmax
    layer between two Dense; and a Reshape to a flat vector."""
    inp = keras.Input((28, 28, 1))
    x = layers.Conv2D(6, 3, strides=2)(inp)
    x = layers.ELU(alpha=0.7)(x)
    x = layers.Reshape((13 * 13 * 6,))(x)
    x = layers.Dense(16)(x)
    x = layers.Softmax()(x)
    out = layers.Dense(10)(x)
    return keras.Model(inp, out, name="act")


def norms():
    """GroupNormalization in 4 groups and per channel (groups -1, no beta), EinsumDense on a
    sequence and on a flat input, and relu6 with
    inputs past its clamp (a convolution drawn with stddev 1.5 gives pre-activations of a few
    units, so some exceed 6)."""
    inp = keras.Input((28, 28, 1))
    x = layers.Conv2D(8, 3, strides=2, activation="relu6",
                      kernel_initializer=keras.initializers.RandomNormal(stddev=1.5))(inp)
    x = layers.GroupNormalization(groups=4)(x)
    x = layers.Conv2D(6, 3, strides=2, use_bias=False)(x)
    x = layers.GroupNormalization(groups=-1, center=False)(x)
    x = layers.Reshape((36, 6))(x)
    x = layers.EinsumDense("abc,cd->abd", output_shape=(36, 5), bias_axes="d")(x)
    x = layers.EinsumDense("...b,bc->...c", output_shape=12, activation="relu6")(
        layers.Flatten()(x))
    out = layers.Dense(10)(x)
    return keras.Model(inp, out, name="norms")


def norms_seq():
    """The same layers in a Sequential model: what a layer accepts never depends on the
    model's kind."""
    return keras.Sequential([
        keras.Input((28, 28, 1)),
        layers.Conv2D(6, 3, strides=2, activation="relu6",
                      kernel_initializer=keras.initializers.RandomNormal(stddev=1.5)),
        layers.GroupNormalization(groups=3),
        layers.Flatten(),
        layers.EinsumDense("ab,bc->ac", output_shape=10, bias_axes="c"),
    ], name="norms_seq")


def se_block():
    """Keras' broadcasting merges as squeeze-and-excitation (EfficientNet, MobileNetV3) uses
    them: a (None, 1, 1, C) gate from GlobalAveragePooling2D(keepdims=True) times the image,
    in both orders; a flat (None, C) added to the image; the hard sigmoid written as
    operations on constants, relu6(x + 3.0) * (1 / 6)."""
    inp = keras.Input((28, 28, 1))
    x = layers.Conv2D(8, 3, strides=2, activation="swish")(inp)
    s = layers.GlobalAveragePooling2D(keepdims=True)(x)
    s = layers.Conv2D(4, 1, activation="relu")(s)
    s = layers.Conv2D(8, 1)(s)
    s = layers.Activation("relu6")(s + 3.0) * (1.0 / 6.0)
    x = layers.Multiply()([x, s])
    f = layers.Dense(8)(layers.GlobalMaxPooling2D()(x))
    x = layers.Add()([f, x])
    g = layers.Conv2D(8, 1, activation="sigmoid")(layers.GlobalAveragePooling2D(keepdims=True)(x))
    x = layers.Multiply()([g, layers.Conv2D(8, 3, strides=2, use_bias=False)(x)])
    out = layers.Dense(10)(layers.Flatten()(x))
    return keras.Model(inp, out, name="se_block")


def nested():
    """ConvNeXt's and Inception-ResNet's structure: a Sequential used as a layer (the stem:
    Conv2D, LayerNormalization), a Functional used as a layer (a block of a Dense on the image,
    LayerScale and CustomScaleLayer; its residual sum x + y an operation node) and a second
    Sequential (downsampling), each with its own weights."""
    inp = keras.Input((28, 28, 1))
    x = keras.Sequential([keras.Input((28, 28, 1)), layers.Conv2D(8, 4, strides=4),
                          layers.LayerNormalization(epsilon=1e-6)], name="stem")(inp)
    bi = keras.Input((7, 7, 8))
    b = layers.Conv2D(8, 3, padding="same")(bi)
    b = layers.Dense(16, activation="gelu")(b)
    b = layers.Dense(8)(b)
    b = LayerScale(0.5, 8)(b)
    b = CustomScaleLayer(0.3)([bi, b]) + bi
    x = keras.Model(bi, b, name="block")(x)
    x = keras.Sequential([layers.LayerNormalization(epsilon=1e-6),
                          layers.Conv2D(12, 2, strides=2)], name="down")(x)
    out = layers.Dense(10)(layers.GlobalAveragePooling2D()(x))
    return keras.Model(inp, out, name="nested")
def depthwise():
    """DepthwiseConv2D with multiplier 2, stride 2 and dilation 2 together, Conv2D with groups
    equal to its channels (multiplier 1 and 2), SeparableConv2D (multiplier 2, and strided
    without bias), and a dilated Conv2D."""
    inp = keras.Input((28, 28, 1))
    x = layers.Conv2D(6, 3, strides=2, activation="relu")(inp)
    x = layers.DepthwiseConv2D(3, strides=2, depth_multiplier=2, dilation_rate=2, padding="same",
                               activation="tanh")(x)
    x = layers.Conv2D(12, 3, padding="same", groups=12, activation="sigmoid")(x)
    x = layers.Conv2D(24, 3, groups=12)(x)
    x = layers.SeparableConv2D(16, 3, depth_multiplier=2, padding="same", activation="tanh")(x)
    x = layers.SeparableConv2D(8, 2, strides=2, use_bias=False)(x)
    x = layers.Conv2D(8, 2, dilation_rate=2, padding="same", activation="tanh")(x)
    out = layers.Dense(10)(layers.Flatten()(x))
    return keras.Model(inp, out, name="depthwise")


def depthwise_seq():
    """The depthwise family in a Sequential model, dilated DepthwiseConv2D with valid padding."""
    return keras.Sequential([
        keras.Input((28, 28, 1)),
        layers.Conv2D(4, 3, strides=2),
        layers.DepthwiseConv2D((3, 2), dilation_rate=(2, 3), depth_multiplier=3,
                               activation="tanh"),
        layers.SeparableConv2D(6, 3, strides=2, padding="same"),
        layers.Flatten(),
        layers.Dense(10),
    ], name="depthwise_seq")


def separable_cells():
    """NASNet's shapes: strided separable convolutions down to 2x2 maps, then 7x7 and 5x5 ones
    wider than those maps ('same': most taps read padding), with BatchNormalization and a
    residual Add."""
    inp = keras.Input((28, 28, 1))
    x = layers.Conv2D(8, 3, strides=2, use_bias=False)(inp)
    for _ in range(3):
        x = layers.SeparableConv2D(12, 3, strides=2, padding="same", use_bias=False)(x)
        x = layers.Activation("relu")(layers.BatchNormalization()(x))
    a = layers.SeparableConv2D(12, 7, padding="same", use_bias=False)(x)
    a = layers.Activation("relu")(layers.BatchNormalization()(a))
    a = layers.SeparableConv2D(12, 5, padding="same", use_bias=False)(a)
    y = layers.Conv2D(12, 1)(layers.Add()([layers.BatchNormalization()(a), x]))
    out = layers.Dense(10)(layers.GlobalAveragePooling2D()(y))
    return keras.Model(inp, out, name="separable_cells")


def upsampling():
    """The layers that make images larger, in each geometry Keras 3 sizes differently:
    UpSampling2D nearest (2 x 3) and bilinear (3, jax.image.resize's half-pixel centres);
    Conv2DTranspose 'valid' with the kernel above the stride, 'same' with the kernel below it
    (no bias), 'same' with output_padding, 'valid' with an output_padding per axis."""
    inp = keras.Input((28, 28, 1))
    x = layers.Conv2D(4, 3, strides=2)(inp)
    a = layers.UpSampling2D((2, 3))(x)
    a = layers.Conv2D(4, 3, strides=3, activation="tanh")(a)
    b = layers.UpSampling2D(3, interpolation="bilinear")(x)
    b = layers.Conv2D(4, 3, strides=3)(b)
    c = layers.Conv2DTranspose(3, 3, strides=2, activation="relu")(x)
    d = layers.Conv2DTranspose(3, 2, strides=3, padding="same", use_bias=False)(x)
    e = layers.Conv2DTranspose(3, 4, strides=2, padding="same", output_padding=1)(x)
    f = layers.Conv2DTranspose(3, (3, 2), strides=(2, 3), output_padding=(1, 2))(x)
    out = layers.Add()([layers.Dense(10)(layers.Flatten()(t)) for t in (a, b, c, d, e, f)])
    return keras.Model(inp, out, name="upsampling")


def upsampling_seq():
    """upsampling()'s layers in a Sequential model: UpSampling2D nearest (2 x 3) and bilinear,
    Conv2DTranspose 'valid' with an output_padding per axis (the kernel above the stride on one
    axis, below it on the other) and 'same' with output_padding, no bias; strided convolutions
    between keep the maps small."""
    return keras.Sequential([
        keras.Input((28, 28, 1)),
        layers.Conv2D(4, 3, strides=3),
        layers.UpSampling2D((2, 3)),
        layers.Conv2D(4, 3, strides=3, activation="tanh"),
        layers.UpSampling2D(2, interpolation="bilinear"),
        layers.Conv2DTranspose(3, (3, 2), strides=(2, 3), output_padding=(1, 2),
                               activation="relu"),
        layers.Conv2D(4, 3, strides=4),
        layers.Conv2DTranspose(3, 4, strides=2, padding="same", output_padding=1,
                               use_bias=False),
        layers.Flatten(),
        layers.Dense(10),
    ], name="upsampling_seq")


def unet():
    """A small U-Net with a class per pixel (labels (N, 28, 28)): two downs (Conv2D,
    BatchNormalization, MaxPooling2D), a Conv2DTranspose and a bilinear UpSampling2D up,
    each Concatenated with its skip, logits per pixel."""
    inp = keras.Input((28, 28, 1))
    c1 = layers.Conv2D(8, 3, padding="same", use_bias=False)(inp)
    c1 = layers.Activation("relu")(layers.BatchNormalization()(c1))
    c2 = layers.Conv2D(12, 3, padding="same", use_bias=False)(layers.MaxPooling2D()(c1))
    c2 = layers.Activation("relu")(layers.BatchNormalization()(c2))
    b = layers.Conv2D(16, 3, padding="same", activation="relu")(layers.MaxPooling2D()(c2))
    u2 = layers.Conv2DTranspose(12, 3, strides=2, padding="same")(b)
    u2 = layers.Conv2D(12, 3, padding="same", activation="relu")(layers.Concatenate()([u2, c2]))
    u1 = layers.UpSampling2D(interpolation="bilinear")(u2)
    u1 = layers.Conv2D(8, 3, padding="same", activation="relu")(layers.Concatenate()([u1, c1]))
    out = layers.Conv2D(5, 1)(u1)
    return keras.Model(inp, out, name="unet")


def misc():
    """ReLU with max_value, negative_slope and threshold, hard_silu and hard_sigmoid (a
    convolution drawn with stddev 1.5 gives inputs on every piece), SpatialDropout2D and a
    Dropout with a mask per example (rate 0 on both sides, as every Dropout here), Rescaling
    and an adapted Normalization (statistics drawn, count 100) after other layers, the global
    poolings with keepdims and a Reshape of their (None, 1, 1, C) to flat."""
    inp = keras.Input((28, 28, 1))
    c = layers.Conv2D(8, 3, strides=2,
                      kernel_initializer=keras.initializers.RandomNormal(stddev=1.5))(inp)
    a = layers.ReLU(max_value=2.5, negative_slope=0.2, threshold=0.3)(c)
    b = layers.Activation("hard_silu")(c)
    h = layers.Activation("hard_sigmoid")(c)
    x = layers.Conv2D(6, 3, strides=2)(layers.Concatenate()([a, b, h]))
    x = layers.ReLU(max_value=6.0)(x)
    x = layers.SpatialDropout2D(0.3)(x)
    x = layers.Dropout(0.3, noise_shape=(None, 1, 1, 1))(x)
    x = layers.Rescaling(0.5, offset=-0.25)(x)
    x = layers.Normalization(name="adapted")(x)
    g = layers.Add()([layers.GlobalAveragePooling2D(keepdims=True)(x),
                      layers.GlobalMaxPooling2D(keepdims=True)(x)])
    out = layers.Dense(10)(layers.Reshape((6,))(g))
    return adapted(keras.Model(inp, out, name="misc"))


def adapted(model):
    """model with its Normalization "adapted" given drawn statistics, not 0 and 1 (count 100)."""
    rng = np.random.default_rng(3)
    norm = model.get_layer("adapted")
    c = norm.input.shape[-1]
    norm.set_weights([rng.uniform(-0.5, 0.5, c), rng.uniform(0.5, 2.0, c), np.array(100)])
    norm.finalize_state()
    return model


def misc_seq():
    """misc()'s layers in a Sequential model (what a layer accepts never depends on the model's
    kind), and SpatialDropout1D on a Reshape of the image to a sequence: the ReLU's three
    options, hard_silu then hard_sigmoid each after a convolution drawn with stddev 1.5 (inputs
    on every piece), the dropouts at rate 0, Rescaling and an adapted Normalization after other
    layers, a keepdims pooling reshaped to flat."""
    wide = keras.initializers.RandomNormal(stddev=1.5)
    return adapted(keras.Sequential([
        keras.Input((28, 28, 1)),
        layers.Conv2D(6, 3, strides=2, kernel_initializer=wide),
        layers.ReLU(max_value=2.5, negative_slope=0.2, threshold=0.3),
        layers.Conv2D(6, 3, strides=2, kernel_initializer=wide),
        layers.Activation("hard_silu"),
        layers.Conv2D(6, 1, kernel_initializer=wide),
        layers.Activation("hard_sigmoid"),
        layers.SpatialDropout2D(0.3),
        layers.Dropout(0.3, noise_shape=(None, 1, 1, 1)),
        layers.Rescaling(0.5, offset=-0.25),
        layers.Normalization(name="adapted"),
        layers.Reshape((36, 6)),
        layers.SpatialDropout1D(0.3),
        layers.Reshape((6, 6, 6)),
        layers.GlobalAveragePooling2D(keepdims=True),
        layers.Reshape((6,)),
        layers.Dense(10),
    ], name="misc_seq"))


def rms_norms():
    """The RMS normalizations on an image's pixels: Keras' RMSNormalization and
    LayerNormalization(rms_scaling=True) (the variance, x itself scaled, gamma drawn away from
    ones), and RMSNormalization on a flat input; KerasHub's two compute in float32 whatever the
    policy, so a float64 step is no oracle for them (tests/keras/rms_e2e.py holds them)."""
    inp = keras.Input((28, 28, 1))
    x = layers.Conv2D(8, 3, strides=2)(inp)
    x = layers.RMSNormalization()(x)
    x = layers.Conv2D(6, 3, strides=2)(x)
    x = layers.LayerNormalization(
        rms_scaling=True, gamma_initializer=keras.initializers.RandomUniform(0.5, 1.5))(x)
    x = layers.RMSNormalization(epsilon=1e-3)(layers.Flatten()(x))
    out = layers.Dense(10)(x)
    return keras.Model(inp, out, name="rms_norms")


def main():
    driver, work = sys.argv[1], sys.argv[2]
    keras.utils.set_random_seed(1)
    rng = np.random.default_rng(7)
    rows, bad = [], 0
    # the later cases last: each case draws its weights and batch from the streams the ones
    # before it left, so appending keeps every earlier case's numbers
    makers = (tutorial_cnn, resnet20, vgg_bn, mlp, zoo, crop, act, norms, norms_seq, misc,
              upsampling, unet, depthwise, depthwise_seq, separable_cells, se_block, nested,
              misc_seq, upsampling_seq, rms_norms)
    only = sys.argv[3:]  # model names: only those (a quicker run while working on one)
    for make in makers:
        if only and make.__name__ not in only:
            continue
        model = make()
        nparams, worst = check(model, driver, work, rng)
        rows.append((model.name, nparams, worst))
        bad += any(v > TOL for k, v in worst.items() if k not in ("zeros", "matched"))
    print(f"{'model':<14} {'params':>8} {'logits':>10} {'loss':>10} {'gradients':>10} "
          f"{'moving stats':>12} {'zero grads':>10}  Keras' step matched")
    for name, nparams, w in rows:
        stats = f"{w['stats']:.2e}" if w["stats"] else "-"
        print(f"{name:<14} {nparams:>8} {w['logits']:>10.2e} {w['loss']:>10.2e} "
              f"{w['grads']:>10.2e} {stats:>12} {w['zeros']:>10}  {w['matched']}")
    print(f"worst relative errors against Keras {keras.__version__} (JAX), "
          f"tolerance {TOL:g}: {'FAIL' if bad else 'ok'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
