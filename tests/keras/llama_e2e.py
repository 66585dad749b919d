"""KerasHub's LlamaTransformerDecoder against KerasHub 0.32 on Keras 3.15 (suite 'keras', the
oracle's venv: tests/keras/llama_e2e.sh), the way tests/keras/named_inputs.py holds
TransformerDecoder: the same .keras archive (hub_llama.py says why the layer needs a patch to
be saved at all), the .npz holding x_train.token_ids and x_train.padding_mask, 2 SGD steps of 32
with --no-shuffle against fit(shuffle=False). Each model: token_ids + padding_mask (padded
sequences, 2..12 real steps) -> Embedding(50, 16) -> 2 LlamaTransformerDecoder(intermediate_dim
24, num_query_heads 4, decoder_padding_mask=padding_mask) -> Dense(3) on each position (labels
per position: a causal LM's shape), with
  - num_key_value_heads 2 (grouped-query attention, 2 query heads per key head), the defaults,
    the inputs (None, None) of int32 as LlamaBackbone's (the data give the length);
  - num_key_value_heads 1 (one key and value head for the 4), inputs of 12 steps, the padding
    mask bool;
  - num_key_value_heads 4 (one each), rope_max_wavelength 500, layer_norm_epsilon 1e-3,
    activation "gelu", and rope_scaling_factor 4: KerasHub 0.32's LlamaRotaryEmbedding does not
    apply it (mwtrain neither), so Keras and mwtrain still agree;
  - one input of token ids (1..12 real steps, and padding inside: holes()) ->
    Embedding(mask_zero=True) -> the blocks (4 on 2)
    without decoder_padding_mask: KerasHub merges the input's mask into the attention's (keys)
    and keeps it on the block's output, so the loss counts the real positions only (the
    blocks' LlamaLayerNorm pass it on inside the block, though alone they drop it).
Asserted: the weights after 2 steps within 1e-4 of each variable's largest value, the losses
within 1e-4 (text_e2e.py's argument: sums of at most 32 x 12 float32 products in other orders;
the rotation's angles come from two pow implementations, 1 / 10000^e in KerasHub's Llama and
10000^-e here, within an ulp or two, which moves a rotated value by ~1e-7 of its size; the
attention's softmax and silu's exp add an ulp each). Controls, each farther than the
tolerance, so the comparison can fail: Keras without the padding mask (without mask_zero), and with another
rope_max_wavelength (100 for the default 10000; 10000 for 500), trained from the same weights.
The first case across the layouts (`mpirun -n 2`, 2 replicas in one process, 1 rank x 4
replicas, 2 nodes x 2 ranks) within 1e-5; its
export after 2 epochs reloads in Keras (the two blocks, their settings), its evaluate() equal
to mwtrain's test loss within 1e-5 relative.
KerasHub's LlamaCausalLM (LlamaBackbone of 2 blocks, 4 query heads on 2, untied embeddings)
from its archive, 2 SGD steps of 32 against KerasHub's train_on_batch (hub_models.py's data:
the next tokens as labels, the padding mask as per-position sample weights) within 1e-4;
control: KerasHub without the sample weights.
Refused, exit 2 and one message naming the layer, the key and the value: dropout 0.1,
rope_low_freq_factor (Llama 3.1's scaling), num_key_value_heads 3 of 4 query heads, an odd
head_dim. (A mixed policy is accepted: tests/keras/mha_mixed.py holds it to Keras.)

usage: llama_e2e.py MWTRAIN WORKDIR"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import text_e2e as E  # noqa: E402  (imports oracle: Keras, and its checks)
import hub_models as HM  # noqa: E402
import named_inputs as NI  # noqa: E402
from hub_llama import patch  # noqa: E402
from oracle import check  # noqa: E402
import keras  # noqa: E402
import keras_hub  # noqa: E402
import numpy as np  # noqa: E402

Llama = patch()
D, FF, HEADS = 16, 24, 4
NAMES = ["token_ids", "padding_mask"]
# case -> the blocks' arguments beyond intermediate_dim and num_query_heads
ARGS = {"gqa": dict(num_key_value_heads=2),
        "mqa": dict(num_key_value_heads=1),
        "mha": dict(num_key_value_heads=4, rope_max_wavelength=500, layer_norm_epsilon=1e-3,
                    activation="gelu", rope_scaling_factor=4.0),
        "masked": dict(num_key_value_heads=2)}


def build(case, seed, with_mask=True, **override):
    L = keras.layers
    keras.utils.set_random_seed(seed)
    steps = None if case == "gqa" else E.T  # LlamaBackbone's (None, None): the data's length
    ids = keras.Input((steps,), dtype="int32", name="token_ids")
    if case == "masked":  # the padding mask of Embedding(mask_zero=True), on one input
        x = L.Embedding(E.V, D, mask_zero=with_mask, name="embed")(ids)
        for j in range(2):
            x = Llama(FF, HEADS, name="llama%d" % j, **dict(ARGS[case], **override))(x)
        return E.compiled(ids, L.Dense(E.K, name="head")(x))
    pm = keras.Input((steps,), dtype="int32" if case == "gqa" else "bool", name="padding_mask")
    args = dict(ARGS[case], **override)
    x = L.Embedding(E.V, D, name="embed")(ids)
    for j in range(2):
        x = Llama(FF, HEADS, name="llama%d" % j, **args)(
            x, decoder_padding_mask=pm if with_mask else None)
    return E.compiled({"token_ids": ids, "padding_mask": pm}, L.Dense(E.K, name="head")(x))


def holes(path, seed):
    """text_e2e's padded tagging data (1..12 real steps, then id 0), with id 0 also at 15 % of
    the steps after the first (padding inside a sequence): the keys a causal attention sees
    before a real step are then masked too, so the mask matters to the real steps' outputs."""
    E.make_data(path, seed, np.int32, padded=True, tags=True)
    d = dict(np.load(path))
    rng = np.random.default_rng(seed + 1)
    for k in ("x_train", "x_test"):
        hole = rng.random(d[k].shape) < 0.15
        hole[:, 0] = False
        d[k] = np.where(hole, 0, d[k]).astype(np.int32)
    np.savez(path, **d)
    return d["x_train"], d["y_train"], d["x_test"], d["y_test"]


def one_case(mw, work, name, case, seed, table):
    data = os.path.join(work, case + ".npz")
    if case == "masked":
        x, y, xt, yt = holes(data, seed)
    else:
        x, y, xt, yt, _, _ = NI.make_data(data, seed, NAMES, True)
    model = build(case, seed)
    path = os.path.join(work, case + ".keras")
    model.save(path)
    shapes = [tuple(w.shape) for w in model.weights]
    out = os.path.join(work, case + "-w.bin")
    if E.mwtrain(mw, work, case, path, data, "--epochs", "1", "--steps-per-epoch", "2",
                 "--dump-weights", out) is None:
        return None
    got = E.split(np.fromfile(out, "<f4"), shapes)
    init_w = [np.asarray(w) for w in model.weights]
    k = keras.models.load_model(path)
    h = k.fit(x, y, batch_size=E.B, epochs=1, shuffle=False, verbose=0).history
    ev = k.evaluate(xt, yt, batch_size=E.N_TEST, verbose=0, return_dict=True)
    werr = E.rel_err(got, k.get_weights())
    check(werr <= E.TOL_W, "%s: weights after 2 steps, relative %.2e <= %g"
          % (name, werr, E.TOL_W))
    wl = 100 if "rope_max_wavelength" not in ARGS[case] else 10000
    for what, u in [("without the padding mask", build(case, seed, with_mask=False)),
                    ("with rope_max_wavelength %d" % wl, build(case, seed,
                                                              rope_max_wavelength=wl))]:
        u.set_weights(init_w)
        u.fit(x, y, batch_size=E.B, epochs=1, shuffle=False, verbose=0)
        e = E.rel_err(got, u.get_weights())
        check(e > E.TOL_W, "control: %s against Keras %s differs, %.2e > %g"
              % (name, what, e, E.TOL_W))
    E.losses(work, case, name, h, ev, werr, table)
    return dict(path=path, data=data, weights=got, shapes=shapes, xt=xt, yt=yt)


def causal_lm(mw, work, table):
    """KerasHub's LlamaCausalLM from its archive (the backbone's arguments; mwtrain builds its
    graph, worker/keras/keras_hub.c), 2 SGD steps against KerasHub's train_on_batch as
    hub_models.py holds GPT2CausalLM; control: KerasHub without the sample weights."""
    name = "LlamaCausalLM, 2 blocks, 4 on 2 key heads"
    data, path = os.path.join(work, "lm.npz"), os.path.join(work, "lm.keras")
    x, y, sw, _ = HM.make_data(data, 3)
    keras.utils.set_random_seed(3)
    bb = keras_hub.models.LlamaBackbone(vocabulary_size=E.V, num_layers=2, num_query_heads=HEADS,
                                        num_key_value_heads=2, hidden_dim=D, intermediate_dim=FF)
    lm = keras_hub.models.LlamaCausalLM(backbone=bb, preprocessor=None)
    HM.compile_sgd(lm)
    lm.save(path)
    shapes = [tuple(w.shape) for w in keras.saving.load_model(path).weights]
    out = os.path.join(work, "lm-w.bin")
    if E.mwtrain(mw, work, "lm", path, data, "--epochs", "1", "--steps-per-epoch", "2",
                 "--dump-weights", out) is None:
        return
    got = E.split(np.fromfile(out, "<f4"), shapes)
    e = E.rel_err(got, HM.keras_steps(path, x, y, sw).weights)
    check(e <= E.TOL_W, "%s: weights after 2 steps, relative %.2e <= %g" % (name, e, E.TOL_W))
    c = E.rel_err(got, HM.keras_steps(path, x, y, None).weights)
    check(c > E.TOL_W, "control: %s against KerasHub without the sample weights differs, %.2e > "
          "%g" % (name, c, E.TOL_W))
    table.append("%-44s %.2e" % (name, e))


def exported(mw, work, name, r):
    """The export reloads in Keras: both blocks, their settings as written."""
    classes = E.export(mw, work, name, r, "ex-gqa")
    if classes is None:
        return
    m = keras.models.load_model(os.path.join(work, "ex-gqa.keras"))
    got = [m.get_layer("llama%d" % j).get_config() for j in range(2)]
    check(classes.count("LlamaTransformerDecoder") == 2 and
          all(c["num_key_value_heads"] == 2 and c["num_query_heads"] == HEADS for c in got),
          "export %s: 2 LlamaTransformerDecoder of 4 query heads on 2 key heads: %s"
          % (name, classes))


def refusals(mw, work):
    who = "layer 'llama0' (LlamaTransformerDecoder)"
    cases = [("dropout 0.1", {}, {"dropout": 0.1}, ["dropout", "0.1"]),
             ("Llama 3.1's RoPE scaling", {}, {"rope_low_freq_factor": 1.0},
              ["rope_low_freq_factor", "1"]),
             ("3 key heads of 4", {}, {"num_key_value_heads": 3},
              ["num_key_value_heads 3", "num_query_heads 4"]),
             ("an odd head_dim", dict(num_key_value_heads=1), {"num_query_heads": 16},
              ["head_dim of 1", "even"])]
    for i, (what, args, patch_cfg, subs) in enumerate(cases):
        keras.utils.set_random_seed(3)
        ids = keras.Input((E.T,), dtype="int32", name="token_ids")
        x = keras.layers.Embedding(E.V, D)(ids)
        x = Llama(FF, HEADS, name="llama0", **dict(dict(num_key_value_heads=2), **args))(x)
        path = os.path.join(work, "bad-%d.keras" % i)
        keras.Model(ids, keras.layers.Dense(E.K)(x)).save(path)
        if patch_cfg:  # a setting Keras itself cannot build or train here
            E.patch_layer(path, "llama0", patch_cfg)
        p = E.run([mw, "summary", "--model", path])
        last = ((p.stdout + p.stderr).strip().splitlines() or [""])[-1]
        check(p.returncode == 2 and all(s in last for s in [who] + subs),
              "refused, %s (exit %d, want 2): %s" % (what, p.returncode, last))


def main():
    mw, work = sys.argv[1], sys.argv[2]
    print("Keras %s, KerasHub %s" % (keras.__version__, keras_hub.__version__))
    table = []
    for name, case, seed in [
            ("2 Llama blocks, 4 query heads on 2 key heads", "gqa", 51),
            ("2 Llama blocks, 4 query heads on 1 key head", "mqa", 52),
            ("2 Llama blocks, 4 on 4, other settings", "mha", 53),
            ("Embedding(mask_zero) -> 2 Llama blocks", "masked", 54)]:
        r = one_case(mw, work, name, case, seed, table)
        if r is None or case != "gqa":
            continue
        E.layouts(mw, work, name, r, case + "-", more="ONEDNN_MAX_CPU_ISA" not in os.environ)
        if "ONEDNN_MAX_CPU_ISA" not in os.environ:
            exported(mw, work, name, r)
    causal_lm(mw, work, table)
    refusals(mw, work)
    E.print_table(table, "Keras + KerasHub")
    return 0


if __name__ == "__main__":
    sys.exit(main())
