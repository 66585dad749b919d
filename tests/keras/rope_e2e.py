"""KerasHub's RotaryEmbedding against KerasHub 0.32 on Keras 3.15 (suite 'keras', the oracle's
venv: tests/keras/rope_e2e.sh), the way tests/keras/hub_e2e.py holds KerasHub's other layers:
the same .keras archive, 2 SGD steps of 32 with --no-shuffle against fit(shuffle=False).
  - Embedding -> RotaryEmbedding() (the defaults: max_wavelength 10000) -> Dense(16, relu) on
    each position -> GlobalAveragePooling1D -> Dense;
  - Embedding -> RotaryEmbedding(max_wavelength=500, scaling_factor=2.5) ->
    MultiHeadAttention(2, 4) on (x, x) -> Add -> GlobalAveragePooling1D -> Dense;
  - Embedding -> RotaryEmbedding(max_wavelength=100, scaling_factor=0.5, denominator_dim=12)
    -> Dense(K) on each position (labels per position);
  - Embedding(mask_zero=True), padded -> RotaryEmbedding() -> Dense(16, relu) ->
    GlobalAveragePooling1D: KerasHub's layer does not support masking, so Keras drops the mask
    there and the pooling averages every step, padding included (the control: Keras with a
    RotaryEmbedding that passes the mask on, the pooling's masked mean, is far off).
Asserted: the weights after 2 steps within 1e-4 of each variable's largest value, the losses
within 1e-4 (text_e2e.py's argument: sums of at most 32 x 12 float32 products in other orders;
the rotation adds its cosines and sines, float32 on both sides from the same float32 angle
(t * inverse frequency): the inverse frequency max_wavelength ^ -(2j / D) from two pow
implementations, within an ulp or two, moves an angle below 12 rad by ~1e-6 and each rotated
value by ~1e-6 of its size: 100 times below the tolerance). The controls show the comparison
can fail: Keras' model without the RotaryEmbedding, and (for the non-default one) with the
default max_wavelength and scaling_factor, trained from the same weights, are each farther
than the tolerance. The export after 2 epochs reloads in Keras (RotaryEmbedding with its
settings), its evaluate() equal to mwtrain's test loss within 1e-5 relative.
Under a mixed policy (bfloat16, float16) KerasHub rotates in 16 bits; the contract the kernels
keep (kernels/rope_rules.h: the cosine and sine rounded, each product, their sum; the gradient's
products and sums likewise), written here in NumPy, equals KerasHub's layer bit for bit, output
and input gradient (JAX's: jitted for bfloat16; for float16 op by op, as jitted XLA's CPU
backend fuses the first product into the sum unrounded, so some values differ, printed), on 3
rows of 16 steps x 8 features; the control: the rotation in float32 rounded once differs (the
unit test `attention` holds the kernels to the same contract).
Refused, exit 2 and one message naming the layer, the key and the value: rope_type "yarn" and
"dynamic", sequence_axis 2, feature_axis 0 (written into the archive: Keras cannot build it),
a call with start_index, an odd feature count.

usage: rope_e2e.py MWTRAIN WORKDIR"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import text_e2e as E  # noqa: E402  (imports oracle: Keras, and its checks)
from oracle import check  # noqa: E402
import keras  # noqa: E402
import keras_hub  # noqa: E402
import numpy as np  # noqa: E402

# case -> the RotaryEmbedding's arguments
ROPE_ARGS = {"rope": {}, "rope-mha": dict(max_wavelength=500, scaling_factor=2.5),
             "rope-gpt": dict(max_wavelength=100, scaling_factor=0.5, denominator_dim=12)}
NO_ROPE, MASKED = "none", "masked"  # the controls: without the layer; passing the mask on


class MaskedRope(keras_hub.layers.RotaryEmbedding):
    """The control of the padded case: the same rotation, passing the padding mask on to the
    pooling (KerasHub's does not)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = True


def build(pool, seed, mask_zero=False, ln=None, rope=None):
    """rope: the RotaryEmbedding's arguments (None: the case's; NO_ROPE: no layer; MASKED:
    MaskedRope)."""
    L = keras.layers
    keras.utils.set_random_seed(seed)
    args = ROPE_ARGS[ln] if rope is None else rope
    inp = keras.Input((E.T,), dtype="int32", name="ids")
    x = L.Embedding(E.V, E.D, mask_zero=mask_zero, name="embed")(inp)
    if args == MASKED:
        x = MaskedRope(name="rope")(x)
    elif args != NO_ROPE:
        x = keras_hub.layers.RotaryEmbedding(name="rope", **args)(x)
    if ln == "rope-mha":
        x = L.Add(name="res")([x, L.MultiHeadAttention(2, 4, name="att")(x, x)])
    elif ln == "rope":
        x = L.Dense(16, activation="relu", name="ff")(x)
    if ln != "rope-gpt":
        x = L.GlobalAveragePooling1D(name="pool")(x)
    return E.compiled(inp, L.Dense(E.K, name="head")(x))


E.build = build


def controls(name, ln, mask, seed, r):
    """Keras without the layer (and with its defaults, for a non-default one; padded: with the
    mask passed on), trained from the same weights and batches: farther from mwtrain's than
    the tolerance."""
    d = np.load(r["data"])
    x, y = d["x_train"], d["y_train"]
    init = keras.models.load_model(r["path"]).get_weights()
    others = [("without RotaryEmbedding", NO_ROPE)]
    if mask:
        others = [("with the mask passed on to the pooling", MASKED)]
    if ROPE_ARGS[ln]:
        others.append(("RotaryEmbedding() at its defaults", {}))
    for what, rope in others:
        u = build("avg", seed, mask, ln, rope=rope)
        u.set_weights(init)
        u.fit(x, y, batch_size=E.B, epochs=1, shuffle=False, verbose=0)
        e = E.rel_err(r["weights"], u.get_weights())
        check(e > E.TOL_W, "control: %s against Keras %s differs, %.2e > %g"
              % (name, what, e, E.TOL_W))


def exported(mw, work, name, ln, r):
    """The export reloads in Keras with the layer's settings (E.export checks its evaluate)."""
    classes = E.export(mw, work, name, r, "ex-" + ln)
    if classes is None:
        return
    out = os.path.join(work, "ex-" + ln + ".keras")
    got = keras.models.load_model(out).get_layer("rope").get_config()
    want = dict(keras_hub.layers.RotaryEmbedding(**ROPE_ARGS[ln]).get_config())
    keys = ("max_wavelength", "scaling_factor", "rope_type", "denominator_dim")
    check("RotaryEmbedding" in classes and all(got[k] == want[k] for k in keys),
          "export %s: RotaryEmbedding with %s" % (name, {k: got[k] for k in keys}))


def summary_refusal(mw, work, i, what, model, subs, patch=None):
    """patch: keys set in the layer's config of the archive (a setting Keras cannot build)."""
    path = os.path.join(work, "bad-rope-%d.keras" % i)
    model.save(path)
    if patch:
        E.patch_layer(path, "rope", patch)
    p = E.run([mw, "summary", "--model", path])
    last = ((p.stdout + p.stderr).strip().splitlines() or [""])[-1]
    check(p.returncode == 2 and all(s in last for s in subs),
          "refused, %s (exit %d, want 2): %s" % (what, p.returncode, last))


def refusals(mw, work):
    L, H = keras.layers, keras_hub.layers

    def seq(rope, d=E.D, dtype=None):
        inp = keras.Input((E.T,), dtype="int32")
        x = L.Embedding(E.V, d)(inp)
        x = H.RotaryEmbedding(name="rope", dtype=dtype, **rope)(x)
        return keras.Model(inp, L.Dense(E.K)(L.GlobalAveragePooling1D()(x)))

    inp = keras.Input((E.T,), dtype="int32")
    x = H.RotaryEmbedding(name="rope")(L.Embedding(E.V, E.D)(inp), start_index=2)
    started = keras.Model(inp, L.Dense(E.K)(L.GlobalAveragePooling1D()(x)))
    who = "layer 'rope' (RotaryEmbedding)"
    for i, (what, model, subs, *patch) in enumerate([
            ("rope_type yarn", seq(dict(rope_type="yarn", scaling_factor=2.0)),
             [who, "rope_type", '"yarn"']),
            ("rope_type dynamic", seq(dict(rope_type="dynamic")),
             [who, "rope_type", '"dynamic"']),
            ("sequence_axis 2", seq(dict(sequence_axis=2, feature_axis=1)),
             [who, "sequence_axis", "2"]),
            ("feature_axis 0", seq({}), [who, "feature_axis", "found 0"],
             {"feature_axis": 0}),
            ("start_index", started, [who, "start_index", "not supported"]),
            ("odd features", seq({}, d=7), [who, "1x12x7", "even number of features"])]):
        summary_refusal(mw, work, i, what, model, subs, *patch)


def contract16():
    """KerasHub's RotaryEmbedding under mixed_bfloat16 and mixed_float16 against the kernels'
    16-bit contract (kernels/rope_rules.h) in NumPy: output and input gradient, bit for bit."""
    import jax
    import jax.numpy as jnp
    rng = np.random.default_rng(3)
    n, t, d = 3, 16, 8
    x32 = rng.standard_normal((n, t, d)).astype(np.float32)
    w32 = rng.standard_normal((n, t, d)).astype(np.float32)
    inv = (10000.0 ** -(np.arange(0, d, 2, dtype=np.float32) / np.float32(d))).astype(np.float32)
    ang = (np.arange(t, dtype=np.float32)[:, None] * inv[None, :]).astype(np.float32)
    for policy, dt in (("mixed_bfloat16", jnp.bfloat16), ("mixed_float16", jnp.float16)):
        def r16(a):
            return np.asarray(jnp.asarray(np.asarray(a, np.float32), dt).astype(jnp.float32))
        layer = keras_hub.layers.RotaryEmbedding(dtype=policy)
        x, w = jnp.asarray(x32, dt), jnp.asarray(w32, dt)

        def grad(a):
            return jax.grad(lambda b: (layer(b) * w).astype(jnp.float32).sum())(a)
        # float16 is compared with the layer run op by op: jitted, XLA's CPU backend fuses the
        # first product into the sum unrounded (an excess precision of its own, printed below;
        # measured: x0 c + round(-x1 s), rounded once), which bfloat16 does not get
        jit = dt == jnp.bfloat16
        y = np.asarray((jax.jit(layer) if jit else layer)(x).astype(jnp.float32))
        g = np.asarray((jax.jit(grad) if jit else grad)(x).astype(jnp.float32))
        xs, ws = r16(x32), r16(w32)
        c, s = r16(np.cos(ang)), r16(np.sin(ang))
        x0, x1, d0, d1 = xs[..., :d // 2], xs[..., d // 2:], ws[..., :d // 2], ws[..., d // 2:]
        want = np.concatenate([r16(r16(x0 * c) + r16(-x1 * s)), r16(r16(x1 * c) + r16(x0 * s))], -1)
        dwant = np.concatenate([r16(r16(d0 * c) + r16(d1 * s)), r16(r16(d1 * c) - r16(d0 * s))],
                               -1)
        once = r16(np.concatenate([x0 * np.cos(ang) - x1 * np.sin(ang),
                                   x1 * np.cos(ang) + x0 * np.sin(ang)], -1))
        check(np.array_equal(y, want), "%s: KerasHub's rotation is the 16-bit contract, bit for "
              "bit (%d of %d differ)" % (policy, int((y != want).sum()), y.size))
        check(np.array_equal(g, dwant), "%s: its input gradient too (%d differ)"
              % (policy, int((g != dwant).sum())))
        check(not np.array_equal(y, once), "%s: control: the float32 rotation rounded once "
              "differs (%d values)" % (policy, int((y != once).sum())))
        if not jit:
            yj = np.asarray(jax.jit(layer)(x).astype(jnp.float32))
            print("note: %s jitted on the CPU: %d of %d values differ from the contract, by "
                  "at most %.3g" % (policy, int((yj != want).sum()), yj.size,
                                    float(np.max(np.abs(yj - want)))))


def main():
    mw, work = sys.argv[1], sys.argv[2]
    print("Keras %s, KerasHub %s" % (keras.__version__, keras_hub.__version__))
    table = []
    for name, seed, mask, ln in [
            ("RotaryEmbedding(), Dense/position, pooled", 41, False, "rope"),
            ("RotaryEmbedding(500, 2.5), attention, pooled", 42, False, "rope-mha"),
            ("RotaryEmbedding(100, 0.5, 12), per position", 43, False, "rope-gpt"),
            ("Embedding(mask_zero), RotaryEmbedding, pooled", 44, True, "rope")]:
        r = E.one_case(mw, work, name, "avg", np.int32, seed, table, mask, ln, control=False)
        if r is None:
            continue
        controls(name, ln, mask, seed, r)
        if not mask:
            exported(mw, work, name, ln, r)
    refusals(mw, work)
    contract16()
    E.print_table(table, "Keras + KerasHub")
    return 0


if __name__ == "__main__":
    sys.exit(main())
