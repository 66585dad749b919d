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
    steps, data and control as GPT2CausalLM's, the same four layouts and export.
  - BertTextClassifier (3 inputs: token_ids, segment_ids, padding_mask; the pooler reads the
    first position, Keras' GetItem), dropout 0: the same 2 steps, layouts and export; control:
    KerasHub with no position masked.
  - ViTImageClassifier (16x16x3 images, patches of 4, the class token's features), dropout 0:
    the same steps, layouts and export; control: KerasHub on the images mirrored. Pooling "gap"
    (the mean over every position, a Mean op) without patch bias: the same steps and export;
    control: KerasHub's pooling "token" from the same weights.
  - A user's Functional model calling one ReversibleEmbedding twice (Keras writes one entry of
    two inbound nodes, the second reverse=True), tied and tie_weights=False: the same steps
    against Keras and export; control: Keras with the other tie_weights from the same table.
  - A nested Functional of two inputs called on two tensors (Keras writes the call's mask as
    [null, null]): the same steps against Keras; control: its inputs swapped.
  - docs/keras.md's block that writes a preprocessor's output under mwtrain's names, run with
    a local tokenizer, and mwtrain training on what it wrote.
  - GemmaCausalLM (2 GemmaDecoderBlocks, 4 query heads of head_dim 6 on 2 key-value heads,
    GeGLU, (1 + scale) RMS norms, the tied embedding scaled by sqrt(D)): the same steps, data and
    control, the four layouts and export; read and written back after a step of
    gradient 0, bit for bit (Keras' heads-first query, key and value kernels reordered both
    ways); again with Gemma 2's post-attention and post-ffw norms, with its
    final_logit_soft_cap 1 (control: KerasHub without the cap), and with its attention's
    logit soft cap 1 (the scores reach 3.7: tanh bends) and sliding window of 3 steps (of 12,
    on the even blocks), controls: KerasHub without each. Dropout is refused by its name, a
    soft cap of 0 and a window of 0 with the expected values. Its config alone (no weights):
    the fresh query, key and value kernels take Keras' glorot limits of their heads-first
    shapes (control: the limits of mwtrain's own order are below 0.9 of them).
Refused with one message: a task model this reader does not build (MistralCausalLM),
a backbone alone, an argument it does not know (of each task and each backbone), metrics and
weighted_metrics both given; ViT's other pooling, head_dtype and channels-first images; a
layer called twice other than forward then reverse, the first call's output read after the
reverse call, a reverse call with no forward call, GetItem x[:, 1:3] and x[:, ::2], a nested
Functional called with more tensors than its inputs (`mwtrain summary`).

Note: KerasHub 0.32 does not restore a task model's compile() from its archive (it warns and
trains with its default Adam); the oracle compiles the loaded model with the archive's own
SGD(0.1) and loss, which is what the archive says and what mwtrain reads.

usage: hub_models.py MWTRAIN WORKDIR"""
import json
import os
import sys
import textwrap
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


def gemma_fresh_init(mw, work, g):
    """g's model from its config.json alone (no weights): mwtrain's fresh query, key and value
    kernels are glorot_uniform with the fans Keras computes for its heads-first shape
    (H, D, head_dim): fan_in D H, fan_out head_dim H; each one's largest |w| lies within
    (0.9, 1] of Keras' limit sqrt(6 / (fan_in + fan_out)) (at least 96 uniform draws: below 0.9
    with probability 0.9^96 = 4e-5). Control: the fans of mwtrain's own order (D, H,
    head_dim), fan_out head_dim D, give a limit below 0.9 of Keras'."""
    from keras.src.initializers.random_initializers import compute_fans
    cfg = os.path.join(work, "gemma-fresh.json")
    with zipfile.ZipFile(g["path"]) as z, open(cfg, "wb") as f:
        f.write(z.read("config.json"))
    dump = os.path.join(work, "gemma-fresh.bin")
    if E.mwtrain(mw, work, "gemma-fresh", cfg, g["data"], "--epochs", "0", "--dump-weights",
                 dump) is None:
        return
    k = keras.saving.load_model(g["path"])
    got = E.split(np.fromfile(dump, "<f4"), [tuple(w.shape) for w in k.weights])
    for w, a in zip(k.weights, got):
        if not w.path.endswith(("query/kernel", "key/kernel", "value/kernel")):
            continue
        fi, fo = compute_fans(tuple(w.shape))
        limit = np.sqrt(6.0 / (fi + fo))
        top = float(np.abs(a).max())
        check(0.9 * limit < top <= limit * (1 + 1e-6),
              "GemmaCausalLM fresh %s %s: largest |w| %.4f within (0.9, 1] of Keras' glorot "
              "limit %.4f (fans %d, %d)" % (w.path, tuple(w.shape), top, limit, fi, fo))
        H, D, hd = w.shape
        own = np.sqrt(6.0 / (D * H + hd * D))
        check(own < 0.9 * limit, "control: mwtrain's own order's fans give %.4f < 0.9 x %.4f"
              % (own, limit))


def gemma_refusals(mw, work, g):
    """Dropout set in the archive of g: one message naming it; soft caps not above 0 and a
    sliding window of 0 steps: one message each with the value and what was expected."""
    bad = edited(work, g["path"], "gemma-dropout",
                 lambda c: c["config"]["backbone"]["config"].update(dropout=0.1))
    refuse(mw, work, "GemmaCausalLM's dropout", bad, g["data"],
           ["GemmaCausalLM: backbone (GemmaBackbone)", "dropout", "not supported"])
    for key, value, want in [
            ("final_logit_soft_cap", 0, "expected null or a number > 0"),
            ("attention_logit_soft_cap", -1, "expected null or a number > 0"),
            ("sliding_window_size", 0, "expected an integer from 1 to")]:
        bad = edited(work, g["path"], "gemma-bad-" + key,
                     lambda c: c["config"]["backbone"]["config"].update(
                         {key: value, "use_sliding_window_attention": True}))
        refuse(mw, work, "GemmaCausalLM's %s %s" % (key, value), bad, g["data"],
               ["GemmaCausalLM: backbone (GemmaBackbone)", "%s: found %s" % (key, value), want])


def gemma_cases(mw, work):
    """GemmaCausalLM as GPT2CausalLM (the same data, steps and control), its layouts, its
    export, its refusals and its optimizer slots; then
    Gemma 2's post norms (both) and its final_logit_soft_cap the same way. A round trip too:
    a step of gradient 0 exported gives the archive's weights back bit for bit (the
    heads-first kernels reordered on the way in and back on the way out)."""
    rows = []
    for tag, name, kw in [("gemma", "GemmaCausalLM (GQA 4/2, head_dim 6, tied)", {}),
                          ("gemma-post", "GemmaCausalLM (post-attention/ffw norms)",
                           {"use_post_attention_norm": True, "use_post_ffw_norm": True}),
                          ("gemma-cap", "GemmaCausalLM (final_logit_soft_cap 1)",
                           {"final_logit_soft_cap": 1.0}),
                          ("gemma-att", "GemmaCausalLM (attention soft cap 1, window 3)",
                           {"attention_logit_soft_cap": 1.0,
                            "use_sliding_window_attention": True, "sliding_window_size": 3})]:
        path = os.path.join(work, tag + ".keras")
        gemma(3, **kw).save(path)
        g = causal_lm(mw, work, tag, "GemmaCausalLM", lambda seed: gemma(seed, **kw))
        if not g:
            continue
        if not kw:
            round_trip(mw, work, g)
            gemma_fresh_init(mw, work, g)
            gemma_refusals(mw, work, g)
            gemma_slots(mw, work, g)
            E.layouts(mw, work, "GemmaCausalLM", g, prefix="gemma", more=True)
        g["export"] = export(mw, work, g)
        for key in ["final_logit_soft_cap", "attention_logit_soft_cap",
                    "use_sliding_window_attention"]:  # each counts: KerasHub without it differs
            if key not in kw:
                continue
            plain = edited(work, path, tag + "-no-" + key, lambda c: c["config"]["backbone"][
                "config"].update({key: False if key.startswith("use") else None}))
            c = E.rel_err(g["weights"], keras_steps(plain, g["x"], g["y"], g["sw"]).weights)
            check(c > 10 * E.TOL_W, "control: KerasHub without %s differs by %.2e > %g"
                  % (key, c, 10 * E.TOL_W))
        rows.append((name, g))
    return rows


def causal_lm(mw, work, tag="gpt2", cls="GPT2CausalLM", make=gpt2):
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
              zip(E.split(np.fromfile(init, "<f4"), shapes), k0.weights)),
          "%s: mwtrain's initial weights are the archive's, bit for bit (%d variables)"
          % (cls, len(shapes)))
    out = os.path.join(work, tag + "-w.bin")
    if E.mwtrain(mw, work, tag, path, data, "--epochs", "1", "--steps-per-epoch", "2",
                 "--dump-weights", out) is None:
        return None
    got = E.split(np.fromfile(out, "<f4"), shapes)
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


def vit(mw, work, tag="vit", pooling="token", patch_bias=True):
    """ViTImageClassifier (ViTBackbone: 16x16x3 images, patches of 4, 2 blocks of width D, 2
    heads, mlp 2D; the class token's features -> Dense), dropout 0, on random images whose label
    is the brightest quadrant's channel: 2 SGD steps as the others; control: KerasHub on the
    images mirrored left-right (the patches move, the class token's attention does not).
    pooling "gap" (the mean over every position, the class token's too, KerasHub's ops.mean)
    with use_patch_bias False: control: KerasHub's pooling "token" on the same weights."""
    rng = np.random.default_rng(7)
    n = N + NT
    img = rng.random((n, 16, 16, 3), np.float32)
    y = np.argmax(img[:, :8, :8, :].mean((1, 2)), -1).astype(np.int32)
    data, path = os.path.join(work, tag + ".npz"), os.path.join(work, tag + ".keras")
    np.savez(data, x_train=img[:N], y_train=y[:N], x_test=img[N:], y_test=y[N:])
    keras.utils.set_random_seed(7)
    bb = keras_hub.models.ViTBackbone(image_shape=(16, 16, 3), patch_size=4, num_layers=2,
                                      num_heads=2, hidden_dim=D, mlp_dim=2 * D,
                                      use_patch_bias=patch_bias)
    clf = keras_hub.models.ViTImageClassifier(backbone=bb, num_classes=3, preprocessor=None,
                                              pooling=pooling)
    compile_sgd(clf)
    clf.save(path)
    shapes = [tuple(w.shape) for w in clf.weights]
    out = os.path.join(work, tag + "-w.bin")
    if E.mwtrain(mw, work, tag, path, data, "--epochs", "1", "--steps-per-epoch", "2",
                 "--dump-weights", out) is None:
        return None
    got = E.split(np.fromfile(out, "<f4"), shapes)

    def steps(x, pool=None):
        k = keras.saving.load_model(path)
        if pool:  # the same weights under another pooling
            k2 = keras_hub.models.ViTImageClassifier(backbone=k.backbone, num_classes=3,
                                                     preprocessor=None, pooling=pool)
            k2.set_weights(k.get_weights())
            k = k2
        compile_sgd(k)
        for s in range(2):
            k.train_on_batch(x[s * B:(s + 1) * B], y[s * B:(s + 1) * B])
        return k
    name = "ViTImageClassifier" + ("" if pooling == "token" else " (pooling %s)" % pooling)
    k = steps(img[:N])
    e = E.rel_err(got, k.weights)
    check(e <= E.TOL_W, "%s, 2 SGD steps: weights against KerasHub's, relative %.2e <= %g"
          % (name, e, E.TOL_W))
    if pooling == "token":
        c = E.rel_err(got, steps(img[:N, :, ::-1]).weights)
        check(c > E.TOL_W, "control: KerasHub on the mirrored images differs by %.2e > %g"
              % (c, E.TOL_W))
    else:
        c = E.rel_err(got, steps(img[:N], "token").weights)
        check(c > E.TOL_W, "control: KerasHub's pooling \"token\" on the same weights differs "
              "by %.2e > %g" % (c, E.TOL_W))
    return {"path": path, "data": data, "shapes": shapes, "weights": got, "keras": k,
            "xt": img[N:], "err": e, "control": c, "tag": tag, "cls": "ViTImageClassifier"}


def shared_emb(tie, seed, weights=None):
    """A user's Functional model calling one ReversibleEmbedding twice: the table on the token
    ids, Dense(D, tanh), then the reverse call on its output as the logits (Keras writes one
    entry of two inbound nodes). weights: [table, Dense kernel, Dense bias] to start from (the
    reverse kernel, when untied, the table's transpose)."""
    keras.utils.set_random_seed(seed)
    ids = keras.Input((T,), dtype="int32", name="token_ids")
    emb = keras_hub.layers.ReversibleEmbedding(V, D, tie_weights=tie, name="emb")
    h = keras.layers.Dense(D, activation="tanh", name="h")(emb(ids))
    m = keras.Model(ids, emb(h, reverse=True))
    if weights is not None:
        m.set_weights(weights[:1] + ([] if tie else [weights[0].T]) + weights[1:])
    compile_sgd(m)
    return m


def shared_reverse(mw, work, tie):
    """The shared-layer form of ReversibleEmbedding (tied, and tie_weights=False: the reverse
    call's own kernel) against Keras: 2 SGD steps from the same archive, every variable within
    1e-4 of its largest value; control: Keras with the other tie_weights from the same table and
    Dense (the untied reverse kernel the table's transpose), on those three variables."""
    tag = "shared-" + ("tied" if tie else "untied")
    rng = np.random.default_rng(11)
    ids = rng.integers(1, V, (N + NT, T + 1)).astype(np.int32)
    ids[:, 1::2] = (ids[:, 0::2][:, :ids[:, 1::2].shape[1]] * 7 + 3) % (V - 1) + 1
    x, y = ids[:, :T], ids[:, 1:]
    data, path = os.path.join(work, tag + ".npz"), os.path.join(work, tag + ".keras")
    np.savez(data, x_train=x[:N], y_train=y[:N], x_test=x[N:], y_test=y[N:])
    shared_emb(tie, 11).save(path)
    cfg = json.loads(zipfile.ZipFile(path).read("config.json"))["config"]
    check([len(e["inbound_nodes"]) for e in cfg["layers"] if e["name"] == "emb"] == [2],
          "%s: Keras writes the ReversibleEmbedding as one entry of two nodes" % tag)
    shapes = [tuple(w.shape) for w in keras.saving.load_model(path).weights]
    out = os.path.join(work, tag + "-w.bin")
    if E.mwtrain(mw, work, tag, path, data, "--epochs", "1", "--steps-per-epoch", "2",
                 "--dump-weights", out) is None:
        return None
    got = E.split(np.fromfile(out, "<f4"), shapes)

    def steps(k):
        for s in range(2):
            k.train_on_batch(x[s * B:(s + 1) * B], y[s * B:(s + 1) * B])
        return k
    k = keras.saving.load_model(path)
    compile_sgd(k)
    e = E.rel_err(got, steps(k).weights)
    check(e <= E.TOL_W, "%s ReversibleEmbedding called twice, 2 SGD steps: weights against "
          "Keras', relative %.2e <= %g" % (tag, e, E.TOL_W))
    init = [np.asarray(w) for w in keras.saving.load_model(path).weights]
    other = steps(shared_emb(not tie, 11, [init[0]] + init[-2:])).weights
    c = E.rel_err([got[0]] + got[-2:], [other[0]] + other[-2:])
    check(c > E.TOL_W, "control: Keras with tie_weights=%s from the same weights differs by "
          "%.2e > %g" % (not tie, c, E.TOL_W))
    return {"path": path, "data": data, "shapes": shapes, "weights": got, "keras": k,
            "xt": x[N:], "err": e, "control": c, "tag": tag, "cls": "Functional"}


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


def vit_refusals(mw, work, v):
    """ViT's arguments mwtrain does not build, each one message naming the key."""
    for what, edit, subs in (
            ("pooling neither token nor gap",
             lambda c: c["config"].update(pooling="max"),
             ["ViTImageClassifier", "pooling: found a string (\"max\")", "supported: \"token\"",
              "\"gap\""]),
            ("a head of another dtype policy",
             lambda c: c["config"].update(head_dtype="bfloat16"),
             ["ViTImageClassifier", "head_dtype", "a head of another dtype policy"]),
            ("channels-first images",
             lambda c: c["config"]["backbone"]["config"].update(data_format="channels_first"),
             ["ViTImageClassifier: backbone (ViTBackbone)", "data_format",
              "channels-first images"])):
        refuse(mw, work, what, edited(work, v["path"], "vit-bad", edit), v["data"], subs)


def summary_refuse(mw, what, model, subs):
    """mwtrain summary of model fails with exit code 2 and one message holding subs."""
    p = E.run([mw, "summary", "--model", model])
    last = (p.stderr.strip().splitlines() or [""])[-1]
    check(p.returncode == 2 and all(x in last for x in subs),
          "refused, %s (exit %d): %s" % (what, p.returncode, last))


def save_fn(work, tag, inputs, outputs, edit=None):
    """A Functional model saved as tag.keras (its config.json edited by edit, when given)."""
    path = os.path.join(work, tag + ".keras")
    keras.Model(inputs, outputs).save(path)
    return edited(work, path, tag + "-edited", edit) if edit else path


def graph_refusals(mw, work):
    """The Functional graphs around these layers mwtrain does not read, each one message naming
    the layer and what it reads instead."""
    ids = keras.Input((T,), dtype="int32", name="token_ids")
    emb = keras_hub.layers.ReversibleEmbedding(V, D, name="emb")
    x = emb(ids)
    late = keras.layers.Add(name="late")([emb(keras.layers.Dense(D, name="h")(x), reverse=True),
                                          keras.layers.Dense(V, name="z")(x)])
    summary_refuse(mw, "the first call's output read after the reverse call",
                   save_fn(work, "rev-late", ids, late),
                   ["layer \"emb\" (ReversibleEmbedding), called twice", "layer \"z\" reads its "
                    "first call's output after its reverse call's input"])
    emb2 = keras_hub.layers.ReversibleEmbedding(V, D, name="emb2")
    summary_refuse(mw, "a ReversibleEmbedding called twice forward",
                   save_fn(work, "emb-twice", ids, keras.layers.Add()([emb2(ids), emb2(ids)])),
                   ["layer 'emb2' (ReversibleEmbedding): inbound_nodes: found an array of 2; "
                    "expected one node (a layer called once)"])
    f = keras.Input((D,), name="f")
    dense = keras.layers.Dense(D, name="shared")
    summary_refuse(mw, "a Dense called twice", save_fn(work, "dense-twice", f, dense(dense(f))),
                   ["layer 'shared' (Dense): inbound_nodes: found an array of 2; expected one "
                    "node (a layer called once)"])

    def orphan(c):  # the reverse call alone: the entry of the Dense "out" made one
        e = c["config"]["layers"][-1]
        e.update(class_name="ReversibleEmbedding", registered_name="keras_hub>ReversibleEmbedding",
                 module="keras_hub.src.layers.modeling.reversible_embedding",
                 config={"name": "out"})
        e["inbound_nodes"][0]["kwargs"] = {"reverse": True}
    f3 = keras.Input((T, D), name="f")
    summary_refuse(mw, "a reverse call whose forward call is not seen",
                   save_fn(work, "rev-orphan", f3, keras.layers.Dense(
                       V, name="out")(keras.layers.Dense(D, name="h")(f3)), orphan),
                   ["layer 'out' (ReversibleEmbedding): its reverse call needs the same layer's "
                    "forward call (its token table) before it"])
    seq = keras.Input((T, D), name="seq")
    emb_seq = keras.layers.Dense(D, name="d")(seq)
    for what, idx, tag in (("x[:, 1:3]", slice(1, 3), "slice"), ("x[:, ::2]", slice(None, None, 2),
                                                                 "step")):
        summary_refuse(mw, "GetItem %s" % what, save_fn(work, "getitem-" + tag, seq, keras.layers.
                                                         Flatten()(emb_seq[:, idx])),
                       ["(GetItem): inbound_nodes[0].args: the index x%s;" % what[1:],
                        "supported: x[:, k, :] or x[:, k], one step of a sequence"])
    path = nested_two(mw, work)

    def three(c):  # the nested model called with 3 tensors
        node = [e for e in c["config"]["layers"] if e["name"] == "inner"][0]["inbound_nodes"][0]
        node["args"][0].append(node["args"][0][0])
    summary_refuse(mw, "a nested Functional called with more inputs than it has",
                   edited(work, path, "nested-3", three),
                   ["layer 'inner' (Functional)", "called with 3 inputs, but the model has 2 "
                    "InputLayers; expected one tensor per input"])


def nested_two(mw, work):
    """A nested Functional of two inputs called on two tensors (Keras writes the call's mask
    as [null, null]): 2 SGD steps against Keras, every variable within 1e-4 of its largest
    value; control: Keras with the nested model's inputs swapped. Returns the archive."""
    keras.utils.set_random_seed(12)
    a, b = keras.Input((D,), name="a"), keras.Input((D,), name="b")
    inner = keras.Model([a, b], keras.layers.Add()([keras.layers.Dense(D, name="da")(a), b]),
                        name="inner")
    g = keras.Input((D,), name="g")
    h = keras.layers.Dense(D, activation="tanh", name="pre")(g)
    path = os.path.join(work, "nested-2.keras")
    m = keras.Model(g, keras.layers.Dense(3, name="out")(inner([h, g])))
    compile_sgd(m)
    m.save(path)
    rng = np.random.default_rng(12)
    x = rng.normal(size=(N + NT, D)).astype(np.float32)
    y = ((x[:, 0] > 0).astype(np.int32) + (x[:, 1] > 0)).astype(np.int32)
    data = os.path.join(work, "nested-2.npz")
    np.savez(data, x_train=x[:N], y_train=y[:N], x_test=x[N:], y_test=y[N:])
    out = os.path.join(work, "nested-2-w.bin")
    if E.mwtrain(mw, work, "nested-2", path, data, "--epochs", "1", "--steps-per-epoch", "2",
                 "--dump-weights", out) is None:
        return path
    got = E.split(np.fromfile(out, "<f4"), [tuple(w.shape) for w in m.weights])

    def steps(model):  # its weights in m's order (by their paths)
        compile_sgd(model)
        for s in range(2):
            model.train_on_batch(x[s * B:(s + 1) * B], y[s * B:(s + 1) * B])
        ws = {w.path: w for w in model.weights}
        return [ws[w.path] for w in m.weights]
    e = E.rel_err(got, steps(keras.saving.load_model(path)))
    check(e <= E.TOL_W, "a nested Functional of 2 inputs, 2 SGD steps: weights against Keras', "
          "relative %.2e <= %g" % (e, E.TOL_W))
    k = keras.saving.load_model(path)
    swapped = keras.Model(k.input, k.get_layer("out")(k.get_layer("inner")(
        [k.input, k.get_layer("pre")(k.input)])))
    c = E.rel_err(got, steps(swapped))
    check(c > E.TOL_W, "control: Keras with its inputs swapped differs by %.2e > %g"
          % (c, E.TOL_W))
    return path


def backbone_refusals(mw, work, cases):
    """An argument each backbone does not know, and one of a task, refused by name."""
    for r in cases:
        if not r:
            continue
        odd = edited(work, r["path"], "odd-" + r["tag"],
                     lambda c: c["config"]["backbone"]["config"].update(odd_arg=1))
        bb = json.loads(zipfile.ZipFile(r["path"]).read("config.json"))["config"]["backbone"]
        refuse(mw, work, "%s: an argument its backbone does not know" % r["cls"], odd, r["data"],
               ["%s: backbone (%s)" % (r["cls"], bb["class_name"]), "odd_arg",
                "is not a key mwtrain knows"])
        odd = edited(work, r["path"], "odd-task-" + r["tag"],
                     lambda c: c["config"].update(odd_arg=1))
        refuse(mw, work, "%s: an argument it does not know" % r["cls"], odd, r["data"],
               ["%s: " % r["cls"], "odd_arg", "is not a key mwtrain knows"])


def doc_snippet(mw, work):
    """docs/keras.md's block that writes a preprocessor's output for mwtrain, run as it stands
    with a local GPT-2 tokenizer in place of the preset (no network): the arrays it writes under
    their names, then mwtrain trains a GPT2CausalLM of that vocabulary on them."""
    doc = open(os.path.join(os.environ["MW_SRCDIR"], "docs", "keras.md")).read()
    blocks = [b.split("```")[0] for b in doc.split("```python")[1:]]
    block = [b for b in blocks if "GPT2CausalLMPreprocessor.from_preset" in b]
    if not check(len(block) == 1, "docs/keras.md holds the preprocessor's block"):
        return
    vocab = {"<|endoftext|>": 0, "a": 1, "b": 2, "\u0120a": 3, "\u0120b": 4, "ab": 5,
             "\u0120ab": 6}
    tok = keras_hub.models.GPT2Tokenizer(vocabulary=vocab, merges=["a b", "\u0120a b"])
    local = keras_hub.models.GPT2CausalLMPreprocessor(tokenizer=tok, sequence_length=T)
    cls = keras_hub.models.GPT2CausalLMPreprocessor
    preset, cls.from_preset = cls.from_preset, lambda *a, **k: local
    rng = np.random.default_rng(4)
    texts = [" ".join(rng.choice(["a", "b", "ab"], rng.integers(1, T // 2))) for _ in range(N + NT)]
    cwd = os.getcwd()
    os.chdir(work)
    try:
        exec(textwrap.dedent(block[0]), {"train_texts": texts[:N], "test_texts": texts[N:]})
    finally:
        os.chdir(cwd)
        cls.from_preset = preset
    d = np.load(os.path.join(work, "lm.npz"))
    want = {"x_train.token_ids": (N, T), "x_train.padding_mask": (N, T), "y_train": (N, T),
            "sample_weight_train": (N, T), "x_test.token_ids": (NT, T),
            "x_test.padding_mask": (NT, T), "y_test": (NT, T), "sample_weight_test": (NT, T)}
    check({k: d[k].shape for k in d.files} == want and d["y_train"].max() > 0,
          "docs' block: lm.npz holds %s" % sorted(d.files))
    keras.utils.set_random_seed(4)
    bb = keras_hub.models.GPT2Backbone(vocabulary_size=len(vocab), num_layers=1, num_heads=2,
                                       hidden_dim=D, intermediate_dim=2 * D,
                                       max_sequence_length=T)
    lm = keras_hub.models.GPT2CausalLM(backbone=bb, preprocessor=None)
    compile_sgd(lm)
    path = os.path.join(work, "doc-lm.keras")
    lm.save(path)
    E.mwtrain(mw, work, "doc-lm", path, os.path.join(work, "lm.npz"), "--epochs", "1")


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
        E.layouts(mw, work, "LlamaCausalLM", lm, prefix="llama", more=True)
        lm["export"] = export(mw, work, lm)
        rows.append(("LlamaCausalLM (GQA 4/2, untied, padded)", lm))
    gm = gemma_cases(mw, work)
    rows += gm
    b = bert(mw, work)
    if b:
        E.layouts(mw, work, "BertTextClassifier", b, prefix="bert", more=True)
        b["export"] = export(mw, work, b)
        rows.append(("BertTextClassifier (3 inputs, padded)", b))
    v = vit(mw, work)
    if v:
        E.layouts(mw, work, "ViTImageClassifier", v, prefix="vit", more=True)
        v["export"] = export(mw, work, v)
        rows.append(("ViTImageClassifier (class token)", v))
        vit_refusals(mw, work, v)
    g = vit(mw, work, "vitgap", "gap", patch_bias=False)
    if g:
        g["export"] = export(mw, work, g)
        rows.append(("ViTImageClassifier (gap, no patch bias)", g))
    backbone_refusals(mw, work, [r, lm, b, v] + [c for _, c in gm[:1]])
    for tie in (True, False):
        sh = shared_reverse(mw, work, tie)
        if sh:
            sh["export"] = export(mw, work, sh)
            rows.append(("ReversibleEmbedding called twice (%s)" % ("tied" if tie else "untied"),
                         sh))
    graph_refusals(mw, work)
    doc_snippet(mw, work)
    print("%-40s %-9s %-9s %s" % ("case (2 SGD steps vs KerasHub)", "weights", "control",
                                  "export logits"))
    for name, c in rows:
        print("%-40s %.2e  %.2e  %s" % (name, c["err"], c["control"], "%.2e" % c["export"]
                                        if c["export"] is not None else "-"))
    finish()


if __name__ == "__main__":
    main()
