"""KerasHub's Vision Transformer layers against KerasHub 0.32 on Keras 3.15 (suite 'keras', the
oracle's venv: tests/keras/vit_e2e.sh), the way tests/keras/hub_e2e.py holds KerasHub's text
layers to it. A Functional model on random 16x16x3 images (64 to train, 32 to test, 10
classes): Input -> ViTPatchingAndEmbedding(patch 4, hidden 16) -> ViTEncoder(2 layers, 2 heads,
mlp_dim 32) -> x[:, 0] (the class token's features: a GetItem operation node, as
ViTImageClassifier takes them) -> Dropout(0) "output_dropout" -> Dense(10) "predictions", and a
second one without the class token (use_class_token=False), without the attention's and the
MLP's biases, layer_norm_epsilon 1e-3, reading the last patch (x[:, -1]), and a third with a
ViTEncoderBlock on its own in place of the ViTEncoder, and a fourth pooled by ops.mean(x,
axis=[1]) (a Mean operation node, ViTImageClassifier's pooling "gap"), and a fifth whose
patching and encoder are a Functional model of their own called in the classifier's (as
ViTImageClassifier calls its ViTBackbone; its weights one level down in .weights.h5), and
KerasHub's ViTImageClassifier(ViTBackbone) itself, saved as the task model (its graph built by
mwtrain from its arguments; Keras trains that graph, the task's fit() wanting a data pipeline).
Asserted as text_e2e.py argues its tolerances (2 SGD steps of 32, --no-shuffle, against
fit(shuffle=False)):
  - mwtrain's initial weights (--epochs 0 --dump-weights) are the archive's, bit for bit;
  - the weights after 2 steps within 1e-4 of each variable's largest value (a gradient entry is
    a sum of at most 32 x 17 products, each with a few float32 roundings, summed in other
    orders; 1e-4 leaves room for the softmax's, the attention's and gelu's exp and erf), the
    train and test losses within 1e-4, the accuracies within 1e-6;
  - control: Keras' model reading x[:, 1] (another token; for the mean, that token alone) from the
    same weights differs by more;
  - layouts: `mpirun -n 2` and 2 replicas in one process within 1e-5 of one process (only the
    order of the float32 sums changes); the control, a global batch of 64, differs by more;
  - the 2 steps' checkpoint exported (--format keras): keras.models.load_model reads it (KerasHub
    cannot load its own save of these layers: ViTPatchingAndEmbedding's config holds
    num_patches and num_positions, ViTEncoderBlock's key_dim, which their constructors refuse;
    the export leaves them out), and its logits equal those of the model Keras trained within
    1e-5 of the largest;
  - the safetensors export names the variables by Keras' paths, in model.weights order.
Refused, each one message naming the layer and the key: num_patches that image_size and
patch_size do not give, a key mwtrain does not know, a slice x[:, 1:3] as GetItem's key, and a
ViTEncoder whose hidden_dim is not its input's features.

usage: vit_e2e.py MWTRAIN WORKDIR"""
import json
import os
import sys
import zipfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import text_e2e as E  # noqa: E402  (imports oracle: Keras, and its checks)
from oracle import check, metrics_rows  # noqa: E402
import keras  # noqa: E402
import keras_hub  # noqa: E402,F401  (KerasHub's version in the header)
import numpy as np  # noqa: E402
from keras_hub.src.models.vit.vit_layers import (  # noqa: E402
    ViTEncoder, ViTEncoderBlock, ViTPatchingAndEmbedding)

H, C, K = 16, 3, 10
TOL_W, TOL_LOSS, TOL_LAYOUT, TOL_EXPORT = E.TOL_W, E.TOL_LOSS, E.TOL_LAYOUT, E.TOL_EXPORT


def build(seed, variant, token=None, hidden=16):
    """The ViT classifier (module docstring); token: the step the head reads (default: the
    variant's)."""
    keras.utils.set_random_seed(seed)
    if variant == "task":  # KerasHub's own task model, its graph built from its arguments
        backbone = keras_hub.models.ViTBackbone(image_shape=(H, H, C), patch_size=4, num_layers=2,
                                                num_heads=2, hidden_dim=16, mlp_dim=32)
        task = keras_hub.models.ViTImageClassifier(backbone=backbone, num_classes=K)
        task.compile(optimizer=keras.optimizers.SGD(E.LR),
                     loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                     metrics=["accuracy"])
        return task
    plain = variant != "bare"
    inp = keras.Input((H, H, C), name="images")
    x = ViTPatchingAndEmbedding(image_size=(H, H), patch_size=(4, 4), hidden_dim=16,
                                num_channels=C, use_class_token=plain,
                                name="vit_patching_and_embedding")(inp)
    if variant == "block":  # a ViTEncoderBlock on its own, a Keras layer of its own
        x = ViTEncoderBlock(num_heads=2, hidden_dim=16, mlp_dim=32, name="block")(x)
    else:
        x = ViTEncoder(num_layers=2, num_heads=2, hidden_dim=hidden, mlp_dim=32,
                       use_mha_bias=plain, use_mlp_bias=plain,
                       layer_norm_epsilon=1e-6 if plain else 1e-3, name="vit_encoder")(x)
    if variant == "nested":  # the backbone a Functional model of its own, as ViTBackbone is
        backbone = keras.Model(inp, x, name="vit_backbone")
        inp = keras.Input((H, H, C), name="images")
        x = backbone(inp)
    if variant == "gap" and token is None:  # ViTImageClassifier(pooling="gap")
        x = keras.ops.mean(x, axis=[1])
    else:
        x = x[:, (-1 if variant == "bare" else 0) if token is None else token]
    x = keras.layers.Dropout(0.0, name="output_dropout")(x)
    return E.compiled(inp, keras.layers.Dense(K, name="predictions")(x))


def make_data(path, seed):
    rng = np.random.default_rng(seed)
    n = E.N_TRAIN + E.N_TEST
    x = rng.standard_normal((n, H, H, C)).astype(np.float32)
    y = rng.integers(0, K, n).astype(np.int32)
    np.savez(path, x_train=x[:E.N_TRAIN], y_train=y[:E.N_TRAIN], x_test=x[E.N_TRAIN:],
             y_test=y[E.N_TRAIN:])
    return x[:E.N_TRAIN], y[:E.N_TRAIN], x[E.N_TRAIN:], y[E.N_TRAIN:]


def exported(mw, work, name, tag, k, xt):
    """The 2 steps' checkpoint exported as .keras: Keras loads it, its logits are those of the
    model Keras trained."""
    ex = os.path.join(work, tag + "-2steps.keras")
    p = E.run([mw, "export", "--checkpoint-dir", os.path.join(work, tag + "-ck"), "--format",
               "keras", "--output", ex])
    if not check(p.returncode == 0, "%s: export after 2 steps (exit %d) %s" %
                 (name, p.returncode, p.stderr[-300:] if p.returncode else "")):
        return
    want = np.asarray(k.predict(xt, batch_size=E.N_TEST, verbose=0))
    loaded = keras.models.load_model(ex)  # a task model predicts through its graph (no pipeline)
    mine = np.asarray(keras.Model(loaded.input, loaded.output).predict(xt, batch_size=E.N_TEST,
                                                                       verbose=0))
    e = float(np.max(np.abs(mine - want)) / np.max(np.abs(want)))
    check(e <= TOL_EXPORT, "%s: keras.models.load_model reads the export; its logits %s = Keras' "
          "own, relative %.2e <= %g" % (name, mine.shape, e, TOL_EXPORT))
    out = os.path.join(work, tag + ".safetensors")
    p = E.run([mw, "export", "--checkpoint-dir", os.path.join(work, tag + "-ck"), "--format",
               "safetensors", "--output", out])
    if check(p.returncode == 0, "%s: safetensors export (exit %d)" % (name, p.returncode)):
        with open(out, "rb") as f:
            n = int.from_bytes(f.read(8), "little")
            names = [q for q in json.loads(f.read(n)) if q != "__metadata__"]
        paths = [w.path for w in k.weights]
        check(names == paths, "%s: the safetensors names are Keras' variable paths in order (%d; "
              "first differing: %s)" % (name, len(names),
                                        next((a for a, b in zip(names, paths) if a != b), "none")))


def one_case(mw, work, name, seed, variant, table):
    tag = "vit-" + variant
    data = os.path.join(work, tag + ".npz")
    x, y, xt, yt = make_data(data, seed)
    k = build(seed, variant)
    path = os.path.join(work, tag + ".keras")
    k.save(path)
    shapes = [tuple(w.shape) for w in k.weights]
    with zipfile.ZipFile(path) as z:  # Keras writes x[:, k] as a GetItem operation node
        cfg = json.loads(z.read("config.json"))
    classes = [cfg["class_name"]] if variant == "task" else \
        [e["class_name"] for e in cfg["config"]["layers"]]
    check({"gap": "Mean", "task": "ViTImageClassifier"}.get(variant, "GetItem") in classes,
          "%s: the archive's layers %s" % (name, classes))
    # a task model's fit() wants a data pipeline (grain or TensorFlow): its graph trains
    fit = E.compiled(k.input, k.output) if variant == "task" else k
    init = os.path.join(work, tag + "-init.bin")
    if E.mwtrain(mw, work, tag + "-init", path, data, "--epochs", "0", "--dump-weights",
                 init) is None:
        return None
    init_w = E.split(np.fromfile(init, "<f4"), shapes)
    check(all(np.array_equal(a, np.asarray(w)) for a, w in zip(init_w, k.weights)),
          "%s: mwtrain's initial weights are the archive's (%d variables)" % (name, len(shapes)))
    out = os.path.join(work, tag + "-w.bin")
    if E.mwtrain(mw, work, tag, path, data, "--epochs", "1", "--steps-per-epoch", "2",
                 "--dump-weights", out) is None:
        return None
    got = E.split(np.fromfile(out, "<f4"), shapes)
    # KerasHub cannot load this archive (see the docstring): Keras trains the model it saved
    h = fit.fit(x, y, batch_size=E.B, epochs=1, shuffle=False, verbose=0).history
    ev = fit.evaluate(xt, yt, batch_size=E.N_TEST, verbose=0, return_dict=True)
    werr = E.rel_err(got, k.get_weights())
    check(werr <= TOL_W, "%s: weights after 2 steps, relative %.2e <= %g" % (name, werr, TOL_W))
    u = build(seed, "plain" if variant == "task" else variant, token=1)
    u.set_weights(init_w)
    u.fit(x, y, batch_size=E.B, epochs=1, shuffle=False, verbose=0)
    e = E.rel_err(got, u.get_weights())
    check(e > TOL_W, "control: %s against Keras reading x[:, 1] differs, %.2e > %g"
          % (name, e, TOL_W))
    row = metrics_rows(os.path.join(work, tag + "-logs"))[0]
    lerr, terr = E.rel(row["train/loss"], h["loss"][0]), E.rel(row["test/loss"], ev["loss"])
    check(lerr <= TOL_LOSS and terr <= TOL_LOSS,
          "%s: train loss %.9g, test loss %.9g = Keras' %.9g, %.9g" %
          (name, row["train/loss"], row["test/loss"], h["loss"][0], ev["loss"]))
    check(abs(row["train/accuracy"] - h["accuracy"][0]) <= 1e-6 and
          abs(row["test/accuracy"] - ev["accuracy"]) <= 1e-6,
          "%s: accuracy %.6g, test %.6g = Keras' %.6g, %.6g" %
          (name, row["train/accuracy"], row["test/accuracy"], h["accuracy"][0], ev["accuracy"]))
    exported(mw, work, name, tag, fit, xt)
    table.append("%-44s %.2e  %.2e  %.2e" % (name, werr, lerr, terr))
    return dict(path=path, data=data, weights=got, shapes=shapes, xt=xt, yt=yt)


def edited(src, dst, edit):
    """src's archive with config.json's layers changed by edit(layers)."""
    with zipfile.ZipFile(src) as z:
        items = {n: z.read(n) for n in z.namelist()}
    cfg = json.loads(items["config.json"])
    edit(cfg["config"]["layers"])
    items["config.json"] = json.dumps(cfg).encode()
    with zipfile.ZipFile(dst, "w") as z:
        for n, b in items.items():
            z.writestr(n, b)


def layer(layers, cls):
    return next(e for e in layers if e["class_name"] == cls)


def refusals(mw, work, r):
    keras.utils.set_random_seed(3)
    inp = keras.Input((H, H, C), name="images")
    x = ViTPatchingAndEmbedding(image_size=(H, H), patch_size=(4, 4), hidden_dim=16,
                                num_channels=C, name="vit_patching_and_embedding")(inp)
    x = ViTEncoder(num_layers=1, num_heads=2, hidden_dim=16, mlp_dim=32, name="vit_encoder")(x)
    sliced = E.compiled(inp, keras.layers.Dense(K)(keras.layers.Flatten()(x[:, 1:3])))
    sliced_path = os.path.join(work, "bad-slice.keras")
    sliced.save(sliced_path)
    cases = [("num_patches not what image_size and patch_size give",
              lambda ls: layer(ls, "ViTPatchingAndEmbedding")["config"].update(num_patches=15),
              ["layer 'vit_patching_and_embedding' (ViTPatchingAndEmbedding)",
               "num_patches 15: expected 16"]),
             ("a key mwtrain does not know",
              lambda ls: layer(ls, "ViTEncoder")["config"].update(use_flash=True),
              ["layer 'vit_encoder' (ViTEncoder)", "use_flash", "is not a key mwtrain knows"]),
             ("a ViTEncoder wider than its input",
              lambda ls: layer(ls, "ViTEncoder")["config"].update(hidden_dim=32),
              ["layer 'vit_encoder' (ViTEncoder)", "hidden_dim 32, but its input has 16 "
               "features"]),
             ("a slice as GetItem's key", None,
              ["(GetItem)", "supported: x[:, k, :] or x[:, k], one step of a sequence"])]
    for i, (what, edit, subs) in enumerate(cases):
        path = sliced_path
        if edit is not None:
            path = os.path.join(work, "bad-%d.keras" % i)
            edited(r["path"], path, edit)
        p = E.run([mw, "train", "--model", path, "--data", r["data"], "--epochs", "1",
                   "--summary-dir", "", "--checkpoint-dir", path + "-ck"])
        last = ((p.stdout + p.stderr).strip().splitlines() or [""])[-1]
        check(p.returncode != 0 and all(s in last for s in subs),
              "refused, %s (exit %d): %s" % (what, p.returncode, last))


def main():
    mw, work = sys.argv[1], sys.argv[2]
    print("Keras %s, KerasHub %s" % (keras.__version__, keras_hub.__version__))
    table = []
    r = one_case(mw, work, "ViT, class token, x[:, 0] -> Dense", 51, "plain", table)
    if r is not None:
        E.layouts(mw, work, "ViT", r, "vit-")
        refusals(mw, work, r)
    one_case(mw, work, "ViT, no class token nor biases, x[:, -1]", 52, "bare", table)
    one_case(mw, work, "ViTPatchingAndEmbedding -> ViTEncoderBlock", 53, "block", table)
    one_case(mw, work, "ViT, ops.mean over the steps -> Dense", 54, "gap", table)
    one_case(mw, work, "ViT backbone as a nested Functional", 55, "nested", table)
    one_case(mw, work, "ViTImageClassifier(ViTBackbone) archive", 56, "task", table)
    E.print_table(table, "Keras + KerasHub")
    return 0


if __name__ == "__main__":
    sys.exit(main())
