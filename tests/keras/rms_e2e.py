"""RMS normalization against Keras 3.15 and KerasHub 0.32 (suite 'keras', the oracle's venv:
tests/keras/rms_e2e.sh), the way tests/keras/text_e2e.py holds the core layers to Keras: the
same archive, 2 SGD steps of 32 with --no-shuffle against fit(shuffle=False); the weights within
1e-4 of each variable's largest value, the losses within 1e-4, the accuracies within 1e-6
(text_e2e.py argues these float32 tolerances: a gradient entry is a sum of at most 32 x 12
products with a few float32 roundings each, ~1.2e-6; a row's statistic adds D = 8 squares and
one rsqrt, a few more roundings of 6e-8); then the checkpoint of 2 epochs exported, and Keras'
evaluate() of the archive equal to mwtrain's test loss within 1e-5 relative (text_e2e.export).
Each class in Embedding(50, 8) -> the normalization -> Dense(16, relu) on each position ->
GlobalAveragePooling1D -> Dense(3), and a tagger (labels per position, no pooling):
  - keras.layers.RMSNormalization (x * rsqrt(mean(x^2) + eps) * scale, eps 1e-6);
  - LayerNormalization(rms_scaling=True, epsilon=1e-3, gamma_initializer uniform): the biased
    variance, not the mean of squares, x itself scaled, no beta though center is true;
  - KerasHub's LlamaLayerNorm (the mean of squares, "scale" of ones);
  - Gemma's RMSNormalization (keras_hub.src.models.gemma.rms_normalization: (1 + scale), scale
    of zeros), which shares its class name with Keras' own: read by its module;
  - a flat input: Embedding -> Flatten -> LlamaLayerNorm over the 96 values -> Dense.
Padded (Embedding(mask_zero=True), sequences 1..T long) before the pooling:
LayerNormalization(rms_scaling) passes the mask on, so the pooling averages the steps that are
not padding (control: Keras without mask_zero); Keras' RMSNormalization (as KerasHub's two) does
not support masking, so Keras drops the mask there and the pooling averages every step (no
control: without mask_zero it is the same model).
Controls, each the same weights and batches in a model with the neighbouring formula, which
must differ by more than the tolerance: Keras' RMSNormalization against rms_scaling (the mean
of squares against the variance), rms_scaling against RMSNormalization(epsilon=1e-3),
LlamaLayerNorm and Gemma against LayerNormalization(rms_scaling=True) with the same epsilon.
Refused, each with one message: a Gemma RMSNormalization from another module (a custom
layer), and RMSNormalization on another axis.

usage: rms_e2e.py MWTRAIN WORKDIR"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import text_e2e as E  # noqa: E402  (imports oracle: Keras, and its checks)
from oracle import check  # noqa: E402
import keras  # noqa: E402
import numpy as np  # noqa: E402
from keras_hub.src.models.gemma.rms_normalization import RMSNormalization as GemmaRMS  # noqa
from keras_hub.src.models.llama.llama_layernorm import LlamaLayerNorm  # noqa: E402

core_build = E.build
L = keras.layers


def norm_layer(kind, name="norm"):
    """The normalization of case kind ("keras", "ln", "llama", "gemma"; "ctl-*" the controls)."""
    gamma = keras.initializers.RandomUniform(0.5, 1.5, seed=3)
    return {"keras": lambda: L.RMSNormalization(name=name),
            "ln": lambda: L.LayerNormalization(rms_scaling=True, gamma_initializer=gamma,
                                               name=name),
            "llama": lambda: LlamaLayerNorm(name=name),
            "gemma": lambda: GemmaRMS(name=name),
            "ctl-var": lambda: L.LayerNormalization(rms_scaling=True, epsilon=1e-6, name=name),
            "ctl-eps": lambda: L.RMSNormalization(epsilon=1e-3, name=name)}[kind]()


def build(pool, seed, mask_zero=False, ln=None):
    if not str(ln).startswith("rms-"):
        return core_build(pool, seed, mask_zero, ln)
    keras.utils.set_random_seed(seed)
    kind = ln.split("-", 2)[-1]
    inp = keras.Input((E.T,), dtype="int32", name="ids")
    x = L.Embedding(E.V, E.D, mask_zero=mask_zero, name="embed")(inp)
    if ln.startswith("rms-flat-"):
        x = norm_layer(kind)(L.Flatten(name="flat")(x))
    else:
        x = L.Dense(16, activation="relu", name="ff")(norm_layer(kind)(x))
        if not ln.startswith("rms-tag-"):
            x = L.GlobalAveragePooling1D(name="pool")(x)
    return E.compiled(inp, L.Dense(E.K, name="head")(x))


E.build = build
core_make_data = E.make_data


def make_data(path, seed, dtype, padded=False, tags=False):
    """text_e2e's data; a tagger's (its files named "-rms-tag-") with a label per position."""
    return core_make_data(path, seed, dtype, padded, tags or "-rms-tag-" in path)


E.make_data = make_data


def control(name, r, ln, ctl, seed):
    """The same start and batches through the neighbouring formula: must differ."""
    u = build("avg", seed, ln=ln.rsplit("-", 1)[0] + "-" + ctl)
    shapes = [tuple(w.shape) for w in u.weights]
    if not check(shapes == r["shapes"], "control %s: the same variables %s" % (name, shapes)):
        return
    init = keras.models.load_model(r["path"]).get_weights()
    u.set_weights(init)
    u.fit(r["x"], r["y"], batch_size=E.B, epochs=1, shuffle=False, verbose=0)
    e = E.rel_err(r["weights"], u.get_weights())
    check(e > E.TOL_W, "control: %s against Keras with %s differs, %.2e > %g"
          % (name, ctl, e, E.TOL_W))


def refusals(mw, work, data):
    import json
    import zipfile
    keras.utils.set_random_seed(3)
    inp = keras.Input((E.T,), dtype="int32")
    x = L.Embedding(E.V, E.D)(inp)
    out = L.Dense(E.K)(L.GlobalAveragePooling1D()(GemmaRMS(name="g")(x)))
    src = os.path.join(work, "gemma.keras")
    keras.Model(inp, out).save(src)
    with zipfile.ZipFile(src) as z:
        items = {n: z.read(n) for n in z.namelist()}
    cfg = json.loads(items["config.json"])
    for lay in cfg["config"]["layers"]:
        if lay["class_name"] == "RMSNormalization":
            lay["module"] = "my_models.norms"
    items["config.json"] = json.dumps(cfg).encode()
    custom = os.path.join(work, "custom.keras")
    with zipfile.ZipFile(custom, "w") as z:
        for n, b in items.items():
            z.writestr(n, b)
    seq = keras.Sequential([keras.Input((E.T,), dtype="int32"), L.Embedding(E.V, E.D),
                            L.RMSNormalization(axis=1, name="r1"), L.GlobalAveragePooling1D(),
                            L.Dense(E.K)])
    axis = os.path.join(work, "axis.keras")
    seq.save(axis)
    for what, path, subs in [
            ("RMSNormalization from another module", custom,
             ["layer 'g' (RMSNormalization)", "module \"my_models.norms\"",
              "a custom layer of that name"]),
            ("RMSNormalization(axis=1)", axis,
             ["layer 'r1' (RMSNormalization)", "axis: found", "supported: -1"])]:
        p = E.run([mw, "train", "--model", path, "--data", data, "--epochs", "1",
                   "--summary-dir", "", "--checkpoint-dir", path + "-ck"])
        last = ((p.stdout + p.stderr).strip().splitlines() or [""])[-1]
        check(p.returncode == 2 and all(s in last for s in subs),
              "refused, %s (exit %d): %s" % (what, p.returncode, last))


def main():
    mw, work = sys.argv[1], sys.argv[2]
    print("Keras %s, KerasHub %s" % (keras.__version__, __import__("keras_hub").__version__))
    table, data = [], None
    for name, seed, ln, ctl in [
            ("RMSNormalization, pooled", 41, "rms-cls-keras", "ctl-var"),
            ("LayerNormalization(rms_scaling), pooled", 42, "rms-cls-ln", "ctl-eps"),
            ("LlamaLayerNorm, pooled", 43, "rms-cls-llama", "ctl-var"),
            ("Gemma RMSNormalization, pooled", 44, "rms-cls-gemma", "ctl-var"),
            ("Gemma RMSNormalization, tagger", 45, "rms-tag-gemma", None),
            ("RMSNormalization, tagger", 46, "rms-tag-keras", None),
            ("LlamaLayerNorm on a flat input", 47, "rms-flat-llama", None),
            ("LayerNormalization(rms_scaling), padded", 48, "rms-cls-ln", "mask"),
            ("RMSNormalization, padded (drops the mask)", 49, "rms-cls-keras", "mask")]:
        mask = ctl == "mask"
        ctl = None if mask else ctl
        r = E.one_case(mw, work, name, "avg", np.int32, seed, table, mask, ln,
                       control=mask and ln == "rms-cls-ln")
        if r is None:
            continue
        tag = "avg-int32-%s%s" % ("mask-" if mask else "", ln)
        x, y, _, _ = E.make_data(os.path.join(work, tag + "-again.npz"), seed, np.int32,
                                 padded=mask)
        r.update(x=x, y=y)
        if ctl:
            control(name, r, ln, ctl, seed)
        E.export(mw, work, name, r, prefix="ex-" + tag)
        data = data or r["data"]
    if data:
        refusals(mw, work, data)
    E.print_table(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
