"""KerasHub's task models against KerasHub 0.32 on Keras 3.15 (suite 'keras', the KerasHub venv:
tests/keras/hub_models.sh). A task model's archive holds its backbone's arguments, not a layer
graph; mwtrain builds the graph KerasHub's Python builds from them (worker/keras/keras_hub.c).

  - GPT2CausalLM (GPT2Backbone of 2 pre-norm TransformerDecoders, width D, 2 heads, the tied
    ReversibleEmbedding as its output projection), saved untrained by KerasHub, trained on
    padded token ids (x_train.token_ids, x_train.padding_mask), the next tokens as labels and
    the padding mask shifted as the per-position sample weights (what KerasHub's
    preprocessor makes): mwtrain's initial weights are the archive's bit for bit, and after 2
    SGD steps of 32 (--no-shuffle; Keras: fittrain_on_batch(x={...}, y, sample_weight=...) on the same
    batches)
    every variable within 1e-4 of its largest value (text_e2e's tolerance and its rel_err:
    the attention's key bias holds rounding noise on both sides); control: Keras without the
    sample weights, which moves the weights by more than that.
  - The layouts (2 ranks, 2 replicas, 1 x 4 replicas, 2 nodes x 2) equal 1 process within 1e-5.
  - `mwtrain export --format keras` of the checkpoint: KerasHub loads it back as a GPT2CausalLM
    holding mwtrain's weights bit for bit, and its logits on the test split equal those of the
    model Keras trained itself within 1e-5 of the largest.
  - KerasHub's default compile (weighted_metrics: a SparseCategoricalAccuracy weighted by the
    sample weights): the epoch's accuracy and loss against KerasHub's over the same 2 steps.
  - LlamaCausalLM (2 LlamaTransformerDecoders, 4 query and 2 key-value heads: grouped-query
    attention, RoPE, SwiGLU, RMS norms; the token embedding untied, Llama's default): the same
    steps, data and control as GPT2CausalLM's, layouts (2 ranks, 2 replicas) and export.
  - BertTextClassifier (3 inputs: token_ids, segment_ids, padding_mask; the pooler reads the
    first position, Keras' GetItem), dropout 0: the same 2 steps, layouts and export; control:
    KerasHub with no position masked.
  - ViTImageClassifier (16x16x3 images, patches of 4, the class token's features), dropout 0:
    the same steps, layouts and export; control: KerasHub on the images mirrored.
  - GemmaCausalLM (2 GemmaDecoderBlocks, 4 query heads of head_dim 6 on 2 key-value heads,
    GeGLU, (1 + scale) RMS norms, the tied embedding scaled by sqrt(D)): the same steps, data and
    control, layouts (2 ranks, 2 replicas) and export; read and written back after a step of
    gradient 0, bit for bit (Keras' heads-first query, key and value kernels reordered both
    ways); again with Gemma 2's post-attention and post-ffw norms. Gemma 2's soft caps, its
    sliding window and dropout are refused, each by its argument's name.
Refused with one message: a task model this reader does not build (MistralCausalLM),
a backbone alone, an argument it does not know, metrics and weighted_metrics both given.

Note: KerasHub 0.32 does not restore a task model's compile() from its archive (it warns and
trains with its default Adam); the oracle compiles the loaded model with the archive's own
SGD(0.1) and loss, which is what the archive says and what mwtrain reads.

usage: hub_models.py MWTRAIN WORKDIR"""
import json
import os
import sys
import zipfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import text_e2e as E  # noqa: E402  (imports oracle: Keras, and its checks)
from oracle import check, finish  # noqa: E402
import keras  # noqa: E402
import keras_hub  # noqa: E402
import numpy as np  # noqa: E402

T, V, D, B = E.T, E.V, E.D, E.B
N, NT = E.N_TRAIN, E.N_TEST


def make_data(path, seed):
    """Padded token ids (each sequence 3..T+1 long, then 0), the inputs its first T, the
    labels its last T (the next token), the sample weights the padding mask of the labels."""
    rng = np.random.default_rng(seed)
    n = N + NT
    ids = rng.integers(1, V, (n, T + 1)).astype(np.int32)
    ids[:, 1::2] = (ids[:, 0::2][:, :ids[:, 1::2].shape[1]] * 7 + 3) % (V - 1) + 1  # learnable
    mask = np.arange(T + 1)[None, :] < rng.integers(3, T + 2, n)[:, None]
    ids[~mask] = 0
    x = {"token_ids": ids[:, :T], "padding_mask": mask[:, :T]}
    y, sw = ids[:, 1:], mask[:, 1:].astype(np.float32)
    arrays = {"y_train": y[:N], "y_test": y[N:], "sample_weight_train": sw[:N]}
    for k, v in x.items():
        arrays["x_train." + k], arrays["x_test." + k] = v[:N], v[N:]
    np.savez(path, **arrays)
    return ({k: v[:N] for k, v in x.items()}, y[:N], sw[:N], {k: v[N:] for k, v in x.items()})


def gpt2(seed, compile_default=False):
    keras.utils.set_random_seed(seed)
    bb = keras_hub.models.GPT2Backbone(vocabulary_size=V, num_layers=2, num_heads=2,
                                       hidden_dim=D, intermediate_dim=2 * D,
                                       max_sequence_length=T + 2, dropout=0.0)
    lm = keras_hub.models.GPT2CausalLM(backbone=bb, preprocessor=None)
    if compile_default:
        lm.compile(optimizer=keras.optimizers.SGD(E.LR))
    else:
        compile_sgd(lm)
    return lm


def compile_sgd(lm):
    lm.compile(optimizer=keras.optimizers.SGD(E.LR),
               loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
               weighted_metrics=[])


def keras_steps(path, x, y, sw):
    """2 steps of B in order (train_on_batch: KerasHub's fit wants TensorFlow for its
    dataset; the same steps)."""
    k = keras.saving.load_model(path)
    compile_sgd(k)  # see the note above: the archive's compile, which KerasHub does not restore
    for s in range(2):
        b = slice(s * B, (s + 1) * B)
        k.train_on_batch({n: v[b] for n, v in x.items()}, y[b],
                         sample_weight=None if sw is None else sw[b])
    return k


def llama(seed):
    """LlamaCausalLM: 2 LlamaTransformerDecoders of 4 query heads and 2 key-value heads
    (grouped-query attention), RoPE, SwiGLU, RMS norms; the token embedding untied (Llama's
    default: the output projection a kernel of its own)."""
    keras.utils.set_random_seed(seed)
    bb = keras_hub.models.LlamaBackbone(vocabulary_size=V, num_layers=2, num_query_heads=4,
                                        num_key_value_heads=2, hidden_dim=D,
                                        intermediate_dim=2 * D)
    lm = keras_hub.models.LlamaCausalLM(backbone=bb, preprocessor=None)
    compile_sgd(lm)
    return lm


def gemma(seed, **gemma2):
    """GemmaCausalLM: 2 GemmaDecoderBlocks of 4 query heads of head_dim 6 (24 features between
    the projections, D outside) on 2 key-value heads (grouped-query attention), RoPE, GeGLU,
    RMS norms of (1 + scale), the token embedding tied and scaled by sqrt(D); gemma2: Gemma 2's
    arguments (use_post_attention_norm, use_post_ffw_norm)."""
    keras.utils.set_random_seed(seed)
    bb = keras_hub.models.GemmaBackbone(vocabulary_size=V, num_layers=2, num_query_heads=4,
                                        num_key_value_heads=2, hidden_dim=D,
                                        intermediate_dim=2 * D, head_dim=6, **gemma2)
    lm = keras_hub.models.GemmaCausalLM(backbone=bb, preprocessor=None)
    compile_sgd(lm)
    return lm


HEADS_FIRST = ("attention/query/kernel", "attention/key/kernel", "attention/value/kernel")


def gemma_layout(path, to_keras):
    """Gemma's query, key and value kernels are heads-first in Keras, (H, D, head_dim); mwtrain
    holds them (D, H, head_dim) as every attention's, and --dump-weights writes its own layout
    (docs/formats.md). to_keras: the dump's variables (split by Keras' shapes) in Keras'
    layouts; else Keras' variables in mwtrain's."""
    swap = [w.path.endswith(HEADS_FIRST) for w in keras.saving.load_model(path).weights]

    def one(w, s):
        w = np.asarray(w)
        if s and to_keras:
            return np.transpose(w.reshape(w.shape[1], w.shape[0], w.shape[2]), (1, 0, 2))
        return np.transpose(w, (1, 0, 2)) if s else w
    return lambda ws: [one(w, s) for w, s in zip(ws, swap)]


def round_trip(mw, work, r):
    """r's archive read and written back: one step whose sample weights are all 0 (a gradient
    of exactly 0, so SGD keeps every weight), exported: KerasHub loads the archive's weights
    bit for bit."""
    a = dict(np.load(r["data"]))
    a["sample_weight_train"] = np.zeros_like(a["sample_weight_train"])
    data = os.path.join(work, r["tag"] + "-w0.npz")
    np.savez(data, **a)
    ex = os.path.join(work, r["tag"] + "-roundtrip.keras")
    if E.mwtrain(mw, work, r["tag"] + "-w0", r["path"], data, "--epochs", "1",
                 "--steps-per-epoch", "1") is None:
        return
    p = E.run([mw, "export", "--checkpoint-dir", os.path.join(work, r["tag"] + "-w0-ck"),
               "--format", "keras", "--output", ex])
    back = keras.saving.load_model(ex) if p.returncode == 0 else None
    want = keras.saving.load_model(r["path"]).weights
    check(back is not None and all(np.array_equal(np.asarray(a), np.asarray(w))
                                   for a, w in zip(want, back.weights)),
          "%s read and written back (a step of gradient 0): the archive's weights bit for bit "
          "(export exit %d %s)" % (r["cls"], p.returncode, p.stderr[-300:]))


def gemma_slots(mw, work, g):
    """The optimizer's slots go out in Keras' layouts too: g's archive with SGD(momentum=0.9),
    2 steps by mwtrain and by KerasHub, the export's /optimizer/vars (after iterations and the
    learning rate, one momentum per variable) against Keras' momentums, shapes equal and values
    within 1e-4 of each one's largest; control: the heads-first kernels' momentums read in
    mwtrain's own order (the transpose skipped) differ."""
    import h5py
    mom = edited(work, g["path"], "gemma-momentum", lambda c: c["compile_config"][
        "optimizer"]["config"].update(momentum=0.9))
    if E.mwtrain(mw, work, "gemma-momentum", mom, g["data"], "--epochs", "1",
                 "--steps-per-epoch", "2") is None:
        return
    ex = os.path.join(work, "gemma-momentum-export.keras")
    p = E.run([mw, "export", "--checkpoint-dir", os.path.join(work, "gemma-momentum-ck"),
               "--format", "keras", "--output", ex])
    if not check(p.returncode == 0, "export with momentum: exit %d %s" % (p.returncode,
                                                                          p.stderr[-300:])):
        return
    with zipfile.ZipFile(ex) as z, z.open("model.weights.h5") as f, h5py.File(f) as h:
        got = [h["optimizer/vars/%d" % i][()] for i in range(2, len(h["optimizer/vars"]))]
    k = keras.saving.load_model(g["path"])
    k.compile(optimizer=keras.optimizers.SGD(E.LR, momentum=0.9),
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
              weighted_metrics=[])
    for s in range(2):
        b = slice(s * B, (s + 1) * B)
        k.train_on_batch({n: v[b] for n, v in g["x"].items()}, g["y"][b],
                         sample_weight=g["sw"][b])
    want = [np.asarray(v) for v in k.optimizer.variables if "momentum" in v.path]
    same = len(got) == len(want) and all(a.shape == w.shape for a, w in zip(got, want))
    e = E.rel_err(got, want) if same else float("inf")
    check(e <= E.TOL_W, "GemmaCausalLM with momentum: the export's %d momentums (Keras' shapes: "
          "%s) against KerasHub's, relative %.2e <= %g" % (len(got), same, e, E.TOL_W))
    own = [np.transpose(a, (1, 0, 2)).reshape(a.shape) if a.ndim == 3 and a.shape[1] == D
           else a for a in got]  # (H, D, head_dim): the query's, the key's, the value's
    c = E.rel_err(own, want) if same else 0.0
    check(c > 10 * E.TOL_W, "control: the query, key and value momentums in mwtrain's order "
          "differ by %.2e > %g" % (c, 10 * E.TOL_W))


def gemma_refusals(mw, work, g):
    """Gemma 2's arguments mwtrain does not implement, and dropout, each set in the archive
    of g: one message naming the argument."""
    for key, value in [("final_logit_soft_cap", 30.0), ("attention_logit_soft_cap", 50.0),
                       ("use_sliding_window_attention", True), ("dropout", 0.1)]:
        bad = edited(work, g["path"], "gemma-" + key,
                     lambda c: c["config"]["backbone"]["config"].update({key: value}))
        refuse(mw, work, "GemmaCausalLM's " + key, bad, g["data"],
               ["GemmaCausalLM: backbone (GemmaBackbone)", key, "not supported"])


def gemma_cases(mw, work):
    """GemmaCausalLM as GPT2CausalLM (the same data, steps and control), its layouts on
    mwtrain's own layout of the dump, its export; then Gemma 2's post norms (both) the same
    way. A round trip first: trained 0 steps and exported, the archive's weights come back bit
    for bit (the heads-first kernels reordered on the way in and back on the way out)."""
    rows = []
    for tag, name, kw in [("gemma", "GemmaCausalLM (GQA 4/2, head_dim 6, tied)", {}),
                          ("gemma-post", "GemmaCausalLM (post-attention/ffw norms)",
                           {"use_post_attention_norm": True, "use_post_ffw_norm": True})]:
        path = os.path.join(work, tag + ".keras")
        gemma(3, **kw).save(path)
        g = causal_lm(mw, work, tag, "GemmaCausalLM", lambda seed: gemma(seed, **kw),
                      gemma_layout(path, True))
        if not g:
            continue
        if not kw:
            round_trip(mw, work, g)
            gemma_refusals(mw, work, g)
            gemma_slots(mw, work, g)
            mine = dict(g, shapes=[tuple(w.shape) for w in gemma_layout(path, False)(
                [np.zeros(s, np.float32) for s in g["shapes"]])],
                weights=gemma_layout(path, False)(g["weights"]))
            E.layouts(mw, work, "GemmaCausalLM", mine, prefix="gemma")
        g["export"] = export(mw, work, g)
        rows.append((name, g))
    return rows


def causal_lm(mw, work, tag="gpt2", cls="GPT2CausalLM", make=gpt2, fix=lambda ws: ws):
    """fix: the variables of --dump-weights (split by Keras' shapes) in Keras' layouts."""
    data, path = os.path.join(work, tag + ".npz"), os.path.join(work, tag + ".keras")
    x, y, sw, xt = make_data(data, 3)
    make(3).save(path)
    shapes = [tuple(w.shape) for w in keras.saving.load_model(path).weights]
    init = os.path.join(work, tag + "-init.bin")
    if E.mwtrain(mw, work, tag + "-init", path, data, "--epochs", "0", "--dump-weights",
                 init) is None:
        return None
    k0 = keras.saving.load_model(path)
    check(all(np.array_equal(a, np.asarray(w)) for a, w in
              zip(fix(E.split(np.fromfile(init, "<f4"), shapes)), k0.weights)),
          "%s: mwtrain's initial weights are the archive's, bit for bit (%d variables)"
          % (cls, len(shapes)))
    out = os.path.join(work, tag + "-w.bin")
    if E.mwtrain(mw, work, tag, path, data, "--epochs", "1", "--steps-per-epoch", "2",
                 "--dump-weights", out) is None:
        return None
    got = fix(E.split(np.fromfile(out, "<f4"), shapes))
    k = keras_steps(path, x, y, sw)
    e = E.rel_err(got, k.weights)
    check(e <= E.TOL_W, "%s, 2 SGD steps: weights against KerasHub's, relative %.2e <= %g"
          % (cls, e, E.TOL_W))
    c = E.rel_err(got, keras_steps(path, x, y, None).weights)
    check(c > 10 * E.TOL_W, "control: KerasHub without the sample weights differs by %.2e > %g"
          % (c, 10 * E.TOL_W))
    return {"path": path, "data": data, "shapes": shapes, "weights": got, "keras": k, "xt": xt,
            "err": e, "control": c, "x": x, "y": y, "sw": sw, "tag": tag, "cls": cls}


def weighted_metrics(mw, work, r, x, y, sw):
    """KerasHub's default compile: a SparseCategoricalAccuracy weighted by the sample weights
    (the padding mask): mwtrain's epoch accuracy (its metrics.csv) against Keras' over the same
    2 steps (its state kept across them, as fit's epoch is), and the epoch's loss (the mean of
    the steps' losses, each sum(w l) / (B T) as Keras' sum_over_batch_size). The accuracy
    is a ratio of weight sums of 0/1 values (exact but for the argmaxes, which agree when the
    logits do within 1e-6); the loss within text_e2e's 1e-4. Control: the unweighted accuracy
    (the mean over every position, padding included) differs. Keras' epoch value is its
    batches' weighted accuracies combined by their weight sums, what fit's running metric
    holds."""
    path = os.path.join(work, "gpt2-default.keras")
    gpt2(3, compile_default=True).save(path)
    logs = os.path.join(work, "gpt2-default-logs")
    if E.mwtrain(mw, work, "gpt2-default", path, r["data"], "--epochs", "1",
                 "--steps-per-epoch", "2") is None:
        return None
    rows = E.metrics_rows(logs)
    k = keras.saving.load_model(path)
    k.compile(optimizer=keras.optimizers.SGD(E.LR))  # KerasHub's defaults but the optimizer
    losses, plain, hits = [], [], 0.0
    for step in range(2):  # Keras 3's train_on_batch reports each batch's own metric
        b = slice(step * B, (step + 1) * B)
        xb = {n: v[b] for n, v in x.items()}
        plain.append(np.mean(np.argmax(keras.ops.convert_to_numpy(k(xb)), -1) == y[b]))
        out = k.train_on_batch(xb, y[b], sample_weight=sw[b], return_dict=True)
        losses.append(out["loss"])
        hits += out["sparse_categorical_accuracy"] * float(np.sum(sw[b]))
    acc, loss = 100 * hits / float(np.sum(sw[:2 * B])), float(np.mean(losses))
    have = rows[-1] if rows else {}
    mine = 100 * have["train/accuracy"] if "train/accuracy" in have else None
    ok = check(mine is not None and abs(mine - acc) <= 1e-4,
               "weighted_metrics: the epoch's weighted accuracy %s%% against KerasHub's %.4f%%"
               % (mine, acc))
    check(ok and abs(100 * np.mean(plain) - acc) > 1e-3,
          "control: the unweighted accuracy %.4f%% differs from the weighted one"
          % (100 * np.mean(plain)))
    check("train/loss" in have and E.rel(have["train/loss"], loss) <= E.TOL_LOSS,
          "weighted_metrics: the epoch's loss %s against KerasHub's %.6f"
          % (have.get("train/loss"), loss))
    return acc


def bert_data(path, seed):
    """BERT's three inputs, padded (3..T long), segment ids 0 then 1 from a random cut, the
    label from the first token (a signal the model can learn)."""
    rng = np.random.default_rng(seed)
    n = N + NT
    ids = rng.integers(1, V, (n, T)).astype(np.int32)
    mask = np.arange(T)[None, :] < rng.integers(3, T + 1, n)[:, None]
    ids[~mask] = 0
    seg = (np.arange(T)[None, :] >= rng.integers(1, T, n)[:, None]).astype(np.int32)
    y = (ids[:, 0] % 3).astype(np.int32)
    x = {"token_ids": ids, "segment_ids": seg, "padding_mask": mask}
    arrays = {"y_train": y[:N], "y_test": y[N:]}
    for k, v in x.items():
        arrays["x_train." + k], arrays["x_test." + k] = v[:N], v[N:]
    np.savez(path, **arrays)
    return {k: v[:N] for k, v in x.items()}, y[:N], {k: v[N:] for k, v in x.items()}


def bert(mw, work):
    """BertTextClassifier (BertBackbone of 2 post-norm TransformerEncoders given the padding
    mask, segment embeddings, the tanh pooler on the first position; Dropout and Dense logits),
    dropout 0 so that both sides train the same function: 2 SGD steps as GPT2CausalLM's;
    control: KerasHub with the padding mask all ones (the padded keys attended)."""
    data, path = os.path.join(work, "bert.npz"), os.path.join(work, "bert.keras")
    x, y, xt = bert_data(data, 5)
    keras.utils.set_random_seed(5)
    bb = keras_hub.models.BertBackbone(vocabulary_size=V, num_layers=2, num_heads=2,
                                       hidden_dim=D, intermediate_dim=2 * D,
                                       max_sequence_length=T, dropout=0.0)
    clf = keras_hub.models.BertTextClassifier(backbone=bb, num_classes=3, preprocessor=None,
                                              dropout=0.0)
    compile_sgd(clf)
    clf.save(path)
    shapes = [tuple(w.shape) for w in clf.weights]
    out = os.path.join(work, "bert-w.bin")
    if E.mwtrain(mw, work, "bert", path, data, "--epochs", "1", "--steps-per-epoch", "2",
                 "--dump-weights", out) is None:
        return None
    got = E.split(np.fromfile(out, "<f4"), shapes)
    k = keras_steps(path, x, y, None)
    e = E.rel_err(got, k.weights)
    check(e <= E.TOL_W, "BertTextClassifier, 2 SGD steps: weights against KerasHub's, relative "
          "%.2e <= %g" % (e, E.TOL_W))
    c = E.rel_err(got, keras_steps(path, dict(x, padding_mask=np.ones_like(x["padding_mask"])),
                                   y, None).weights)
    check(c > E.TOL_W, "control: KerasHub with no padding masked differs by %.2e > %g (what the "
          "check catches)" % (c, E.TOL_W))
    return {"path": path, "data": data, "shapes": shapes, "weights": got, "keras": k, "xt": xt,
            "err": e, "control": c, "tag": "bert", "cls": "BertTextClassifier"}


def vit(mw, work):
    """ViTImageClassifier (ViTBackbone: 16x16x3 images, patches of 4, 2 blocks of width D, 2
    heads, mlp 2D; the class token's features -> Dense), dropout 0, on random images whose label
    is the brightest quadrant's channel: 2 SGD steps as the others; control: KerasHub on the
    images mirrored left-right (the patches move, the class token's attention does not)."""
    rng = np.random.default_rng(7)
    n = N + NT
    img = rng.random((n, 16, 16, 3), np.float32)
    y = np.argmax(img[:, :8, :8, :].mean((1, 2)), -1).astype(np.int32)
    data, path = os.path.join(work, "vit.npz"), os.path.join(work, "vit.keras")
    np.savez(data, x_train=img[:N], y_train=y[:N], x_test=img[N:], y_test=y[N:])
    keras.utils.set_random_seed(7)
    bb = keras_hub.models.ViTBackbone(image_shape=(16, 16, 3), patch_size=4, num_layers=2,
                                      num_heads=2, hidden_dim=D, mlp_dim=2 * D)
    clf = keras_hub.models.ViTImageClassifier(backbone=bb, num_classes=3, preprocessor=None)
    compile_sgd(clf)
    clf.save(path)
    shapes = [tuple(w.shape) for w in clf.weights]
    out = os.path.join(work, "vit-w.bin")
    if E.mwtrain(mw, work, "vit", path, data, "--epochs", "1", "--steps-per-epoch", "2",
                 "--dump-weights", out) is None:
        return None
    got = E.split(np.fromfile(out, "<f4"), shapes)

    def steps(x):
        k = keras.saving.load_model(path)
        compile_sgd(k)
        for s in range(2):
            k.train_on_batch(x[s * B:(s + 1) * B], y[s * B:(s + 1) * B])
        return k
    k = steps(img[:N])
    e = E.rel_err(got, k.weights)
    check(e <= E.TOL_W, "ViTImageClassifier, 2 SGD steps: weights against KerasHub's, relative "
          "%.2e <= %g" % (e, E.TOL_W))
    c = E.rel_err(got, steps(img[:N, :, ::-1]).weights)
    check(c > E.TOL_W, "control: KerasHub on the mirrored images differs by %.2e > %g"
          % (c, E.TOL_W))
    return {"path": path, "data": data, "shapes": shapes, "weights": got, "keras": k,
            "xt": img[N:], "err": e, "control": c, "tag": "vit", "cls": "ViTImageClassifier"}


def export(mw, work, r):
    ex = os.path.join(work, r["tag"] + "-export.keras")
    p = E.run([mw, "export", "--checkpoint-dir", os.path.join(work, r["tag"] + "-ck"),
               "--format", "keras", "--output", ex])
    if not check(p.returncode == 0, "export: exit %d %s" % (p.returncode, p.stderr[-400:])):
        return None
    back = keras.saving.load_model(ex)
    check(type(back).__name__ == r["cls"] and
          all(np.array_equal(a, np.asarray(w)) for a, w in zip(r["weights"], back.weights)),
          "export: KerasHub loads a %s holding mwtrain's weights bit for bit"
          % type(back).__name__)
    # the models called on the arrays (KerasHub's predict wants grain or TensorFlow)
    want = keras.ops.convert_to_numpy(r["keras"](r["xt"]))
    have = keras.ops.convert_to_numpy(back(r["xt"]))
    e = float(np.max(np.abs(have - want)) / np.max(np.abs(want)))
    check(e <= E.TOL_EXPORT, "export: its logits against the model KerasHub trained, relative "
          "%.2e <= %g" % (e, E.TOL_EXPORT))
    return e


def edited(work, src, tag, edit):
    """A copy of archive src whose config.json edit(cfg) changed."""
    out = os.path.join(work, tag + ".keras")
    with zipfile.ZipFile(src) as zi, zipfile.ZipFile(out, "w") as zo:
        for item in zi.infolist():
            data = zi.read(item.filename)
            if item.filename == "config.json":
                cfg = json.loads(data)
                edit(cfg)
                data = json.dumps(cfg).encode()
            zo.writestr(item, data)
    return out


def refuse(mw, work, what, model, data, subs):
    p = E.run([mw, "train", "--model", model, "--data", data, "--epochs", "1", "--summary-dir",
               "", "--checkpoint-dir", os.path.join(work, "bad-ck")])
    last = (p.stderr.strip().splitlines() or [""])[-1]
    check(p.returncode != 0 and all(s in last for s in subs),
          "refused, %s (exit %d): %s" % (what, p.returncode, last))


def refusals(mw, work, r):
    keras.utils.set_random_seed(1)
    bb = keras_hub.models.MistralBackbone(vocabulary_size=V, num_layers=1, num_query_heads=2,
                                          num_key_value_heads=1, hidden_dim=D,
                                          intermediate_dim=2 * D)
    p = os.path.join(work, "mistral.keras")
    keras_hub.models.MistralCausalLM(backbone=bb, preprocessor=None).save(p)
    refuse(mw, work, "a task model not built", p, r["data"],
           ["class_name \"MistralCausalLM\"", "supported: the task models GPT2CausalLM"])
    bb = os.path.join(work, "gpt2-backbone.keras")
    keras.saving.load_model(r["path"]).backbone.save(bb)
    refuse(mw, work, "a backbone alone", bb, r["data"],
           ["class_name \"GPT2Backbone\"", "a backbone alone has no output layer"])
    odd = edited(work, r["path"], "odd-arg",
                 lambda c: c["config"]["backbone"]["config"].update(rotary=True))
    refuse(mw, work, "an argument it does not know", odd, r["data"],
           ["GPT2CausalLM: backbone (GPT2Backbone)", "rotary", "is not a key mwtrain knows"])
    both = edited(work, r["path"], "both-metrics", lambda c: c["compile_config"].update(
        metrics=["accuracy"], weighted_metrics=["accuracy"]))
    refuse(mw, work, "metrics and weighted_metrics both", both, r["data"],
           ["compile_config.weighted_metrics", "metrics and weighted_metrics both given"])


def main():
    mw, work = sys.argv[1], sys.argv[2]
    rows = []
    r = causal_lm(mw, work)
    if r:
        E.layouts(mw, work, "GPT2CausalLM", r, prefix="gpt2", more=True)
        r["export"] = export(mw, work, r)
        weighted_metrics(mw, work, r, r["x"], r["y"], r["sw"])
        refusals(mw, work, r)
        rows.append(("GPT2CausalLM (tied, padded, weighted)", r))
    lm = causal_lm(mw, work, "llama", "LlamaCausalLM", llama)
    if lm:
        E.layouts(mw, work, "LlamaCausalLM", lm, prefix="llama")
        lm["export"] = export(mw, work, lm)
        rows.append(("LlamaCausalLM (GQA 4/2, untied, padded)", lm))
    rows += gemma_cases(mw, work)
    b = bert(mw, work)
    if b:
        E.layouts(mw, work, "BertTextClassifier", b, prefix="bert")
        b["export"] = export(mw, work, b)
        rows.append(("BertTextClassifier (3 inputs, padded)", b))
    v = vit(mw, work)
    if v:
        E.layouts(mw, work, "ViTImageClassifier", v, prefix="vit")
        v["export"] = export(mw, work, v)
        rows.append(("ViTImageClassifier (class token)", v))
    print("%-40s %-9s %-9s %s" % ("case (2 SGD steps vs KerasHub)", "weights", "control",
                                  "export logits"))
    for name, c in rows:
        print("%-40s %.2e  %.2e  %s" % (name, c["err"], c["control"], "%.2e" % c["export"]
                                        if c["export"] is not None else "-"))
    finish()


if __name__ == "__main__":
    main()
