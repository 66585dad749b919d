"""KerasHub's layers against KerasHub 0.32 on Keras 3.15 (suite 'keras', its own venv:
tests/keras/hub_e2e.sh), the way tests/keras/text_e2e.py holds the core layers to Keras: the
same archive, 2 SGD steps of 32 with --no-shuffle against fit(shuffle=False), the weights
within 1e-4 of each variable's largest value, the losses within 1e-4, the accuracies within
1e-6, the layouts (`mpirun -n 2`, 2 replicas) within 1e-5, and the 2 steps' checkpoint
exported, Keras' logits of it equal to those of its own training within 1e-5.
  - TokenAndPositionEmbedding(50, 12, 8) -> a Transformer block of core layers
    (MultiHeadAttention, Add, LayerNormalization, Dense) -> GlobalAveragePooling1D -> Dense;
  - TokenAndPositionEmbedding(50, 16, 8) (a position table longer than the 12 steps: its
    first rows) -> a causal block -> Dense on each position (a GPT's shape);
  - Embedding + SinePositionEncoding(max_wavelength=500) -> Add -> the block -> pooling;
  - Embedding(mask_zero=True) + PositionEmbedding(12) -> Add -> the block -> pooling, padded:
    the PositionEmbedding takes no mask, and Keras 3.15's Add keeps a mask only when every
    input has one, so nothing after it is masked (no control: without mask_zero it is the
    same model).
  - Embedding(mask_zero=True) -> the two TransformerDecoder -> Dense on each position,
    padded: the blocks keep the mask to the output, so the loss and the token accuracy count
    the positions that are not padding (control: Keras without mask_zero).
  - TokenAndPositionEmbedding(mask_zero=True), padded, whose mask KerasHub sets on the output
    tensor only, never in the graph (every layer after it takes the tensor's mask at run time):
    -> the core block -> pooling: the attention masks the padded queries and keys, then
    deletes the mask of its input, so the residual Add has none and the pooling averages
    every step (control: Keras without mask_zero; with the mask in the graph, as
    Embedding(mask_zero)'s, the pooling would average the steps that are not padding: the
    weights were then 1.43 from Keras'); -> the two TransformerDecoder -> Dense on each
    position: the blocks read it and keep it to the loss (control: the same).
Refused, each one message: a ReversibleEmbedding called twice forward (a second inbound node
that is not its reverse call, which tests/keras/hub_models.py trains), a
TransformerDecoder with cross-attention, and a sequence longer than
TokenAndPositionEmbedding's sequence_length.

usage: hub_e2e.py MWTRAIN WORKDIR"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import text_e2e as E  # noqa: E402  (imports oracle: Keras, and its checks)
from oracle import check  # noqa: E402
import keras  # noqa: E402
import keras_hub  # noqa: E402
import numpy as np  # noqa: E402

core_build = E.build


compiled = E.compiled


def build_blocks(ln, mask_zero, inp):
    """KerasHub's own blocks: Embedding(mask_zero) -> TransformerEncoder -> pooling -> Dense,
    or TokenAndPositionEmbedding -> TransformerDecoder (post-norm) -> TransformerDecoder
    (normalize_first, gelu) -> Dense on each position; hub-dec-padgpt: the same decoders after
    Embedding(mask_zero), padded, the mask reaching the loss."""
    L, H = keras.layers, keras_hub.layers
    if ln == "hub-enc":
        x = L.Embedding(E.V, E.D, mask_zero=mask_zero, name="embed")(inp)
        x = H.TransformerEncoder(16, 2, name="enc")(x)
        return compiled(inp, L.Dense(E.K, name="head")(L.GlobalAveragePooling1D(name="pool")(x)))
    if ln == "hub-dec-padgpt":
        x = L.Embedding(E.V, E.D, mask_zero=mask_zero, name="embed")(inp)
    else:
        x = H.TokenAndPositionEmbedding(E.V, E.T, E.D, mask_zero=mask_zero, name="tok_pos")(inp)
    x = H.TransformerDecoder(16, 2, name="dec1")(x)
    x = H.TransformerDecoder(16, 2, activation="gelu", normalize_first=True, name="dec2")(x)
    return compiled(inp, L.Dense(E.K, name="head")(x))


def build(pool, seed, mask_zero=False, ln=None):
    if not str(ln).startswith("hub"):
        return core_build(pool, seed, mask_zero, ln)
    L, H = keras.layers, keras_hub.layers
    keras.utils.set_random_seed(seed)
    inp = keras.Input((E.T,), dtype="int32", name="ids")
    if ln in ("hub-enc", "hub-dec-gpt", "hub-dec-padgpt"):
        return build_blocks(ln, mask_zero, inp)
    if ln in ("hub-pos", "hub-sine"):
        x = L.Embedding(E.V, E.D, mask_zero=mask_zero, name="embed")(inp)
        p = H.PositionEmbedding(E.T, name="pos") if ln == "hub-pos" else \
            H.SinePositionEncoding(max_wavelength=500, name="sine")
        x = L.Add(name="with_pos")([x, p(x)])
    else:
        x = H.TokenAndPositionEmbedding(E.V, E.T + (4 if ln == "hub-gpt" else 0), E.D,
                                        mask_zero=mask_zero, name="tok_pos")(inp)
    causal = ln == "hub-gpt"
    a = L.MultiHeadAttention(2, 4, name="att")(x, x, use_causal_mask=causal)
    x = L.LayerNormalization(name="ln1")(L.Add(name="res1")([x, a]))
    f = L.Dense(E.D, name="ff2")(L.Dense(16, activation="gelu", name="ff1")(x))
    x = L.LayerNormalization(name="ln2")(L.Add(name="res2")([x, f]))
    if not causal:
        x = L.GlobalAveragePooling1D(name="pool")(x)
    return compiled(inp, L.Dense(E.K, name="head")(x))


E.build = build


def refusals(mw, work, data):
    keras.utils.set_random_seed(3)
    inp = keras.Input((E.T,), dtype="int32")
    rev = keras_hub.layers.ReversibleEmbedding(E.V, E.D, name="rev")
    x = keras.layers.Add()([rev(inp), rev(inp)])
    m = keras.Model(inp, keras.layers.Dense(E.K)(keras.layers.GlobalAveragePooling1D()(x)))
    enc = keras.layers.Embedding(E.V, E.D)(inp)
    x = keras_hub.layers.TransformerDecoder(16, 2, name="xdec")(enc, enc)
    cross = keras.Model(inp, keras.layers.Dense(E.K)(keras.layers.GlobalAveragePooling1D()(x)))
    for i, (what, model, subs) in enumerate([
            ("a layer called twice forward (Keras' second inbound node)", m,
             ["layer 'rev' (ReversibleEmbedding)", "expected one node (a layer called once)"]),
            ("a TransformerDecoder with cross-attention", cross,
             ["layer 'xdec' (TransformerDecoder)", "called on 2 tensors",
              "decoder-only use"]),
            ("a sequence longer than sequence_length",
             keras.Sequential([keras.Input((E.T,), dtype="int32"),
                               keras_hub.layers.TokenAndPositionEmbedding(E.V, E.T - 2, E.D,
                                                                          name="short"),
                               keras.layers.GlobalAveragePooling1D(),
                               keras.layers.Dense(E.K)]),
             ["'short' (TokenAndPositionEmbedding): sequence_length 10, but the input has 12 "
              "steps"])]):
        path = os.path.join(work, "bad-%d.keras" % i)
        model.save(path)
        p = E.run([mw, "train", "--model", path, "--data", data, "--epochs", "1",
                   "--summary-dir", "", "--checkpoint-dir", path + "-ck"])
        last = ((p.stdout + p.stderr).strip().splitlines() or [""])[-1]
        check(p.returncode != 0 and all(s in last for s in subs),
              "refused, %s (exit %d): %s" % (what, p.returncode, last))


def safetensors_names(mw, work, name, r):
    """The safetensors export names a block's variables by their Keras paths
    (enc/self_attention_layer/query/kernel, ...), in model.weights order."""
    ck = os.path.splitext(r["path"])[0] + "-ck"
    out = os.path.join(work, "names.safetensors")
    p = E.run([mw, "export", "--checkpoint-dir", ck, "--format", "safetensors", "--output", out])
    if not check(p.returncode == 0, "%s: safetensors export (exit %d) %s" %
                 (name, p.returncode, p.stderr[-300:] if p.returncode else "")):
        return
    with open(out, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        names = [k for k in json.loads(f.read(n)) if k != "__metadata__"]
    want = [w.path for w in keras.models.load_model(r["path"]).weights]
    check(names == want, "%s: the safetensors names are Keras' variable paths in order (%d, "
          "first differing: %s)" % (name, len(names),
                                    next((a for a, b in zip(names, want) if a != b), "none")))


def missing_nested_group(mw, work, name, r):
    """A block's archive without one of its attention's sublayer groups: refused, naming the
    part and the two-level group."""
    import h5py
    import zipfile
    src, bad = r["path"], os.path.join(work, "nested-missing.keras")
    with zipfile.ZipFile(src) as z:
        items = {n: z.read(n) for n in z.namelist()}
    h5 = os.path.join(work, "nested.weights.h5")
    with open(h5, "wb") as f:
        f.write(items["model.weights.h5"])
    with h5py.File(h5, "a") as f:
        del f["layers/transformer_encoder/_self_attention_layer/key_dense"]
    with open(h5, "rb") as f:
        items["model.weights.h5"] = f.read()
    with zipfile.ZipFile(bad, "w") as z:
        for n, b in items.items():
            z.writestr(n, b)
    p = E.run([mw, "train", "--model", bad, "--data", r["data"], "--epochs", "1",
               "--summary-dir", "", "--checkpoint-dir", bad + "-ck"])
    last = ((p.stdout + p.stderr).strip().splitlines() or [""])[-1]
    check(p.returncode != 0 and "layer 'enc/self_attention_layer' (MultiHeadAttention)" in last
          and "_self_attention_layer/key_dense/vars is missing" in last,
          "%s: a missing sublayer group is refused (exit %d): %s" % (name, p.returncode, last))


def main():
    mw, work = sys.argv[1], sys.argv[2]
    print("Keras %s, KerasHub %s" % (keras.__version__, keras_hub.__version__))
    table = []
    data = None
    for name, seed, mask, ln in [
            ("TokenAndPositionEmbedding, block, pooled", 31, False, "hub-cls"),
            ("TokenAndPositionEmbedding, causal block", 32, False, "hub-gpt"),
            ("Embedding + SinePositionEncoding, block", 34, False, "hub-sine"),
            ("Embedding + PositionEmbedding, block", 33, True, "hub-pos"),
            ("Embedding(mask_zero) -> TransformerEncoder", 35, True, "hub-enc"),
            ("TokenAndPositionEmbedding -> 2 TransformerDecoder", 36, False, "hub-dec-gpt"),
            ("Embedding(mask_zero) -> 2 TransformerDecoder", 37, True, "hub-dec-padgpt"),
            ("TokenAndPositionEmbedding(mask_zero), block, pooled", 38, True, "hub-cls"),
            ("TokenAndPositionEmbedding(mask_zero) -> 2 TransformerDecoder", 39, True,
             "hub-dec-gpt")]:
        r = E.one_case(mw, work, name, "avg", np.int32, seed, table, mask, ln,
                       control=mask and ln != "hub-pos")
        if r is not None:
            E.layouts(mw, work, name, r, ln + ("-mask-" if mask else "-"),
                      more=ln == "hub-dec-gpt" and not mask)
            if ln in ("hub-enc", "hub-dec-gpt") and not mask:
                safetensors_names(mw, work, name, r)
            if ln == "hub-enc":
                missing_nested_group(mw, work, name, r)
            data = data or r["data"]
    if data:
        refusals(mw, work, data)
    E.print_table(table, "Keras + KerasHub")
    return 0


if __name__ == "__main__":
    sys.exit(main())
