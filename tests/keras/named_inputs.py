"""Models of several named inputs against Keras 3.15 and KerasHub 0.32 (suite 'keras', the
KerasHub venv: tests/keras/named_inputs.sh), as tests/keras/text_e2e.py holds one-input token
models: the same archive, the .npz holding x_train.<input name> and x_test.<input name>,
2 SGD steps of 32 with --no-shuffle against fit(x={name: array}, shuffle=False), the weights
within 1e-4 of each variable's largest value and the losses within 1e-4 (text_e2e's
tolerances, argued there), the layouts (`mpirun -n 2`, 2 replicas) within 1e-5, and an export
whose Keras evaluate equals mwtrain's test loss within 1e-5.
  - token_ids + padding_mask -> Embedding -> TransformerEncoder(padding_mask=) -> pooling ->
    Dense, padded: the mask given as a tensor masks the keys (KerasHub merges it into the
    attention mask (batch, 1, S)); control: Keras without the padding_mask argument;
  - token_ids + padding_mask -> TokenAndPositionEmbedding -> 2 TransformerDecoder
    (decoder_padding_mask=) -> Dense on each position, padded (a causal LM's shape);
    control: the same without the mask;
  - the same decoders with sample weights per position (N, T), the padding mask: a causal
    LM's loss as KerasHub's preprocessor masks it; control: no mask, no weights;
  - token_ids + segment_ids + padding_mask (BERT's inputs), each Input((None,)) as KerasHub's
    are (the data give the length; the export, from the checkpoint alone, takes the length the
    run recorded) -> token and segment Embeddings added -> TransformerEncoder(padding_mask=) ->
    pooling -> Dense;
  - a_seg + ids: Embedding(mask_zero=True) on the second part of the row (the mask's ids are
    not at the row's start), a TransformerEncoder taking that mask, pooled over the steps that
    are not padding, added to the other input's pooled embedding; control: without mask_zero.
Refused, each one message naming what is wrong: an input without its array, an array without
its input, a test split without an input the training split has, a float array as a named
input, data of named inputs for a Sequential model and without --model, a length that
differs from the InputLayer's, sample weights of another shape than the labels' and a
negative one at a position, and a padding mask given twice (mask_zero and a tensor).
(KerasHub's task models, built from their archives' arguments: tests/keras/hub_models.py.)

usage: named_inputs.py MWTRAIN WORKDIR"""
import json
import os
import sys
import zipfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import text_e2e as E  # noqa: E402  (imports oracle: Keras, and its checks)
from oracle import check  # noqa: E402
import keras  # noqa: E402
import keras_hub  # noqa: E402
import numpy as np  # noqa: E402

T, V, D, K, B = E.T, E.V, E.D, E.K, E.B
N, NT = E.N_TRAIN, E.N_TEST


def make_data(path, seed, names, per_position, weighted=False):
    """Token ids with a signal (text_e2e's), padded (each sequence 2..T long, then 0),
    segment ids 0 then 1 from a random cut, the padding mask 1 where the ids are real;
    weighted: sample weights per position, the padding mask (as a causal LM's loss is
    masked)."""
    rng = np.random.default_rng(seed)
    n = N + NT
    y, ids = E.signal_tokens(rng, n)
    lengths = rng.integers(2, T + 1, n)
    mask = np.arange(T)[None, :] < lengths[:, None]
    ids[~mask] = 0
    seg = (np.arange(T)[None, :] >= rng.integers(1, T, n)[:, None]).astype(np.int32)
    if per_position:
        y = (ids % K + (rng.random((n, T)) < 0.2)) % K
    cols = {"token_ids": ids.astype(np.int32), "ids": ids.astype(np.int32),
            "padding_mask": mask, "segment_ids": seg, "a_seg": seg}
    x = {k: cols[k] for k in names}
    arrays = {"y_train": y[:N].astype(np.int32), "y_test": y[N:].astype(np.int32)}
    for k, v in x.items():
        arrays["x_train." + k], arrays["x_test." + k] = v[:N], v[N:]
    sw = mask.astype(np.float32) if weighted else np.ones(mask.shape, np.float32)
    if weighted:
        arrays["sample_weight_train"], arrays["sample_weight_test"] = sw[:N], sw[N:]
    np.savez(path, **arrays)
    return ({k: v[:N] for k, v in x.items()}, y[:N], {k: v[N:] for k, v in x.items()}, y[N:],
            sw[:N], sw[N:])


compiled = E.compiled


def build(case, seed, with_mask=True):
    """with_mask False: the control, the same weights without the padding mask."""
    L, H = keras.layers, keras_hub.layers
    keras.utils.set_random_seed(seed)
    steps = None if case == "bert" else T  # (None, None): the data give the length
    ids = keras.Input((steps,), dtype="int32", name="ids" if case == "mask-zero" else "token_ids")
    if case == "mask-zero":
        seg = keras.Input((T,), dtype="int32", name="a_seg")
        x = L.Embedding(V, D, mask_zero=with_mask, name="embed")(ids)
        x = L.GlobalAveragePooling1D(name="pool")(H.TransformerEncoder(16, 2, name="enc")(x))
        s = L.GlobalAveragePooling1D(name="seg_pool")(L.Embedding(2, D, name="seg_embed")(seg))
        out = L.Dense(K, name="head")(L.Add(name="both")([x, s]))
        return compiled({"ids": ids, "a_seg": seg}, out)
    pm = keras.Input((steps,), dtype="bool", name="padding_mask")
    inputs = {"token_ids": ids, "padding_mask": pm}
    mask = pm if with_mask else None
    if case.startswith("decoder"):
        x = H.TokenAndPositionEmbedding(V, T, D, name="tok_pos")(ids)
        x = H.TransformerDecoder(16, 2, name="dec1")(x, decoder_padding_mask=mask)
        x = H.TransformerDecoder(16, 2, normalize_first=True, activation="gelu",
                                 name="dec2")(x, decoder_padding_mask=mask)
        return compiled(inputs, L.Dense(K, name="head")(x))
    x = L.Embedding(V, D, name="embed")(ids)
    if case == "bert":
        seg = keras.Input((steps,), dtype="int32", name="segment_ids")
        inputs["segment_ids"] = seg
        x = L.Add(name="with_seg")([x, L.Embedding(2, D, name="seg_embed")(seg)])
    x = H.TransformerEncoder(16, 2, name="enc")(x, padding_mask=mask)
    return compiled(inputs, L.Dense(K, name="head")(L.GlobalAveragePooling1D(name="pool")(x)))


NAMES = {"encoder": ["token_ids", "padding_mask"], "decoder": ["token_ids", "padding_mask"],
         "decoder-sw": ["token_ids", "padding_mask"],
         "bert": ["token_ids", "segment_ids", "padding_mask"], "mask-zero": ["ids", "a_seg"]}


def one_case(mw, work, name, case, seed, table):
    data = os.path.join(work, case + ".npz")
    weighted = case == "decoder-sw"
    x, y, xt, yt, sw, swt = make_data(data, seed, NAMES[case], case.startswith("decoder"),
                                      weighted)
    fit_w, ev_w = (sw, swt) if weighted else (None, None)
    model = build(case, seed)
    path = os.path.join(work, case + ".keras")
    model.save(path)
    shapes = [tuple(w.shape) for w in model.weights]
    out = os.path.join(work, case + "-w.bin")
    stdout = E.mwtrain(mw, work, case, path, data, "--epochs", "1", "--steps-per-epoch", "2",
                       "--dump-weights", out)
    if stdout is None:
        return None
    got = E.split(np.fromfile(out, "<f4"), shapes)
    init_w = [np.asarray(w) for w in model.weights]
    k = keras.models.load_model(path)
    h = k.fit(x, y, sample_weight=fit_w, batch_size=B, epochs=1, shuffle=False,
              verbose=0).history
    ev = k.evaluate(xt, yt, sample_weight=ev_w, batch_size=NT, verbose=0, return_dict=True)
    werr = E.rel_err(got, k.get_weights())
    check(werr <= E.TOL_W, "%s: weights after 2 steps, relative %.2e <= %g" % (name, werr, E.TOL_W))
    u = build(case, seed, with_mask=False)
    u.set_weights(init_w)
    u.fit(x, y, batch_size=B, epochs=1, shuffle=False, verbose=0)  # no mask, no weights
    e = E.rel_err(got, u.get_weights())
    check(e > E.TOL_W, "control: %s against Keras without the mask differs, %.2e > %g"
          % (name, e, E.TOL_W))
    E.losses(work, case, name, h, ev, werr, table)
    return dict(path=path, data=data, weights=got, shapes=shapes, xt=xt, yt=yt)


def kept_lengths(path, name):
    """The export keeps the InputLayers' (None, None) and leaves out the lengths mwtrain
    recorded for itself."""
    cfg = json.loads(zipfile.ZipFile(path).read("config.json"))
    shapes = [lay["config"]["batch_shape"] for lay in cfg["config"]["layers"]
              if lay["class_name"] == "InputLayer"]
    check(shapes == [[None, None]] * 3 and "mwtrain_input_lengths" not in cfg,
          "export %s: the InputLayers' shapes %s as written, no mwtrain key (%s)"
          % (name, shapes, sorted(cfg)))


def last_line(p):
    return ((p.stdout + p.stderr).strip().splitlines() or [""])[-1]


def refuse(mw, work, what, model, data, subs, extra=()):
    cmd = [mw, "train", "--data", data, "--epochs", "1", "--summary-dir", "",
           "--checkpoint-dir", os.path.join(work, "bad-ck"), *extra]
    if model:
        cmd += ["--model", model]
    p = E.run(cmd)
    last = last_line(p)
    check(p.returncode != 0 and all(s in last for s in subs),
          "refused, %s (exit %d): %s" % (what, p.returncode, last))


def bad_npz(work, tag, **arrays):
    path = os.path.join(work, "bad-%s.npz" % tag)
    np.savez(path, **arrays)
    return path


def refusals(mw, work, r):
    """r: the encoder case (token_ids, padding_mask)."""
    xs, xt = {k: np.asarray(v) for k, v in r["xt"].items()}, r["xt"]
    y = np.zeros(len(xs["token_ids"]), np.int32)
    base = {"y_train": y, "y_test": y}
    both = lambda k, v: {"x_train." + k: v, "x_test." + k: v}  # noqa: E731
    only_ids = bad_npz(work, "ids", **base, **both("token_ids", xs["token_ids"]))
    refuse(mw, work, "an input without its array", r["path"], only_ids,
           ["layer 'padding_mask' (InputLayer)", "no input named like it",
            "x_train.padding_mask", "they hold: token_ids"])
    extra = bad_npz(work, "extra", **base, **both("token_ids", xs["token_ids"]),
                    **both("padding_mask", xs["padding_mask"]), **both("lengths", y[:, None]))
    refuse(mw, work, "an array without its input", r["path"], extra,
           ["x_train.lengths is not an input of the model"])
    no_test = dict(base, **both("token_ids", xs["token_ids"]),
                   **{"x_train.padding_mask": xs["padding_mask"]})
    refuse(mw, work, "a test split without an input", r["path"],
           bad_npz(work, "notest", **no_test),
           ["x_train.padding_mask has no x_test.padding_mask beside it"])
    floats = bad_npz(work, "float", **base, **both("token_ids", xs["token_ids"]),
                     **both("padding_mask", xs["padding_mask"].astype(np.float32)))
    refuse(mw, work, "a float named input", r["path"], floats,
           ["x_train.padding_mask.npy", "'<f4'", "expected integers or booleans"])
    good = bad_npz(work, "good", **base, **both("token_ids", xs["token_ids"]),
                   **both("padding_mask", xs["padding_mask"]))
    seq = keras.Sequential([keras.Input((T,), dtype="int32"), keras.layers.Embedding(V, D),
                            keras.layers.GlobalAveragePooling1D(), keras.layers.Dense(K)])
    seq_path = os.path.join(work, "seq.keras")
    seq.save(seq_path)
    refuse(mw, work, "named inputs for a Sequential model", seq_path, good,
           ["named inputs (x_train.padding_mask, ...)", "a Sequential model takes one input"])
    refuse(mw, work, "named inputs without --model", None, good,
           ["named inputs (x_train.padding_mask, ...)", "expected --model"])
    short = bad_npz(work, "short", **base, **both("token_ids", xs["token_ids"][:, :T - 2]),
                    **both("padding_mask", xs["padding_mask"][:, :T - 2]))
    refuse(mw, work, "a length other than the InputLayer's", r["path"], short,
           ["layer 'token_ids' (InputLayer)", "batch_shape (None, 12)", "has 10 values"])
    tags = np.zeros((len(y), T), np.int32)  # labels per position, weights of another shape
    arrays = dict(y_train=tags, y_test=tags, **both("token_ids", xs["token_ids"]),
                  **both("padding_mask", xs["padding_mask"]))
    refuse(mw, work, "sample weights of another shape than the labels'", r["path"],
           bad_npz(work, "sw-shape", **arrays,
                   sample_weight_train=np.ones((len(y), T - 1), np.float32)),
           ["sample_weight_train.npy", "sample weights of shape (32, 11)",
            "or one per label position, the labels' shape"])
    neg = np.ones((len(y), T), np.float32)
    neg[2, 5] = -1
    refuse(mw, work, "a negative weight at a position", r["path"],
           bad_npz(work, "sw-neg", **arrays, sample_weight_train=neg),
           ["sample_weight_train.npy: example 2 has sample weight -1 at position 5"])
    keras.utils.set_random_seed(5)
    ids, pm = keras.Input((T,), dtype="int32", name="token_ids"), keras.Input((T,), name="padding_mask", dtype="int32")
    x = keras.layers.Embedding(V, D, mask_zero=True, name="embed")(ids)
    x = keras_hub.layers.TransformerEncoder(16, 2, name="enc")(x, padding_mask=pm)
    twice = compiled({"token_ids": ids, "padding_mask": pm},
                     keras.layers.Dense(K)(keras.layers.GlobalAveragePooling1D()(x)))
    twice_path = os.path.join(work, "twice.keras")
    twice.save(twice_path)
    refuse(mw, work, "a padding mask given twice", twice_path, good,
           ["a padding mask given as a tensor ('padding_mask')", "Embedding(mask_zero=True)",
            "supported: one of them"])


def main():
    mw, work = sys.argv[1], sys.argv[2]
    print("Keras %s, KerasHub %s" % (keras.__version__, keras_hub.__version__))
    table = []
    enc = None
    for name, case, seed in [
            ("token_ids + padding_mask -> TransformerEncoder", "encoder", 41),
            ("token_ids + padding_mask -> 2 TransformerDecoder", "decoder", 42),
            ("the decoders, the loss weighted per position", "decoder-sw", 45),
            ("BERT's 3 inputs -> TransformerEncoder", "bert", 43),
            ("Embedding(mask_zero) on the 2nd named input", "mask-zero", 44)]:
        r = one_case(mw, work, name, case, seed, table)
        if r is None:
            continue
        if case in ("encoder", "mask-zero"):
            E.layouts(mw, work, name, r, case + "-")
        if case == "encoder":
            enc = r
        if case in ("encoder", "bert") and "ONEDNN_MAX_CPU_ISA" not in os.environ:
            if E.export(mw, work, name, r, prefix=case + "-ex") and case == "bert":
                kept_lengths(os.path.join(work, case + "-ex.keras"), name)
    if enc:
        refusals(mw, work, enc)
    E.print_table(table, "Keras + KerasHub")
    return 0


if __name__ == "__main__":
    sys.exit(main())
