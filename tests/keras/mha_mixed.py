"""MultiHeadAttention under mixed_bfloat16 and mixed_float16, against Keras in float64.

A Transformer block of core layers (Embedding -> MultiHeadAttention(2 heads, key_dim 4) ->
Add -> LayerNormalization -> Dense(16, gelu) -> Dense -> Add -> LayerNormalization -> Dense on
each position; causal, and not causal; causal after KerasHub's RotaryEmbedding, which rotates
in 16 bits) is built by Keras under each mixed policy and saved;
mwtrain reads the policy of every layer from the archive. So are KerasHub's blocks (Embedding ->
TransformerDecoder(16, 2) -> TransformerDecoder(16, 2, gelu, normalize_first) -> Dense on each
position; Embedding(50, 8) -> 2 LlamaTransformerDecoder(16, 4 query heads on 2 key heads) ->
Dense on each position), which mwtrain builds from the same layers, under mixed_bfloat16: under
mixed_float16 their evaluation after the step below overflows float16 (a non-finite test loss
ends the run) at any rate that resolves the query and key kernels' gradients. And KerasHub's
ViTImageClassifier (ViTBackbone: 8x8x3 images, patches of 4, 2 blocks of width 8, 2 heads, mlp
16; the class token's features, x[:, 0], to the head) on 32 random images labelled by their
brightest quadrant's channel, under both policies (LR 2^3 under mixed_float16: 2^6 overflows
its evaluation). And KerasHub's Gemma, under both policies (LR 2^3 under mixed_float16, as
ViT): Embedding(50, 8) -> GemmaDecoderBlock(16, head_dim 6, 4 query heads on 2 key heads) ->
GemmaDecoderBlock with Gemma 2's post norms, attention soft cap 1.0 and sliding window of 3 ->
Dense on each position; the same two blocks in a Sequential model (without the window), under
mixed_bfloat16 (the Sequential reader's path to the blocks' policies); and a GemmaCausalLM
(GemmaBackbone of 2 blocks of that size: the
named token_ids and padding_mask inputs, the tied embedding times sqrt(8) cast to the compute
dtype, the reverse call's 16-bit logits); and a LlamaCausalLM and a GPT2CausalLM of that size
(2 blocks of width 8: Llama's 4 query heads on 2 key heads, GPT2's 2 heads and its position
embedding) under mixed_bfloat16 (both passed under mixed_float16 too, at LR 2^6: 0.97x and
0.13x of Keras' distance over all variables, Keras' 16-bit bias sums dominating GPT2's).
And a user's Functional that calls one ReversibleEmbedding forward, then in reverse for the
logits (tied), around a TransformerDecoder(16, 2), under mixed_bfloat16 (under mixed_float16 it
passed too: 0.25x). Its reverse call computed in float32 (the reader's split of the shared
entry lost the layer's dtype): the last LayerNormalization's beta gradient was then 2.5e-4
from float64 against Keras' 5.2e-3, outside 4x, Keras' error the rounded table's, coherent
over the positions.
Gemma's attention computes by KerasHub's einsum path
(its path on a CPU): the scaled query, the scores and the cap's steps are 16-bit tensors too
(mw_attn_geom.half_scores); with those roundings left out (the fused path's points) mwtrain's
Gemma decoders measured 0.68x of D_keras under mixed_bfloat16 (the query and key kernels
0.64x), with them 1.15x (1.14x), nearer Keras. One batch of 32 token sequences (12
steps) or images, one SGD step with a large learning rate LR: mwtrain's gradient is (w0 - w1) / LR. The
rate keeps the float32 cancellation out of it: w1 is about w0 - LR g, rounded to 2^-24 of
itself; with a rate of 1 the query and key kernels, whose gradients are 1e-6 of their weights,
came out 7 % off (a float32 run measured it). LR is 2^19 under mixed_bfloat16 (that error
under 1e-7) and 2^6 under mixed_float16, whose evaluation after the step overflows float16
from 2^11 on (a non-finite test loss ends the run); there the query and key kernels carry up
to 1e-3 of cancellation, as much as float16's rounding, so theirs are the loosest checks. At
2^3 (ViT's and Gemma's) the float32 control, which carries the same cancellation, measured
2.8e-7 to 7.0e-6 over all the variables, against Keras' own 2.7e-3 and more.

The yardstick is Keras in float64 on the same weights and batch (G64). Distances are relative
L2 norms, D(G) = |G - G64| / |G64|, per variable and over all of them:
  - Keras' own mixed gradient, D_keras: what its 16-bit tensors cost (its fused attention path,
    ops.dot_product_attention, which Keras 3.15 takes without dropout);
  - mwtrain's mixed gradient, D_mw (the ref backend; the cpu backend too where it runs
    mixed_bfloat16). Both round float32 values to the same format at nearly the same points
    (both: the layers' inputs, outputs and output gradients, the projections, the probabilities
    where they multiply V, the heads' outputs, and the gradients of each; Keras also rounds
    each projection before its bias and the weights' gradients), each rounding an
    error of at most u / 2 relative (u = 2^-8 for bfloat16, 2^-11 for float16), so the two
    distances are of one size: for every kernel, embedding table and norm, and over all of
    them, D_keras / 4 <= D_mw <= 4 D_keras (a factor of 4 for where a sum of a few dozen such
    errors lands; measured 0.58-1.71 per variable). A biased layer's bias gradient is a
    reduction over the batch and steps, which XLA's CPU backend sums in 16 bits (Keras 3-5x
    further from float64 there than on the kernels): mwtrain's, summed in float32, is held to at
    most 4 D_keras. The key bias is left out: its gradient is zero in exact arithmetic (the
    softmax does not see it), so both sides hold rounding noise;
  - the control: mwtrain in float32 (--dtype-policy float32) from the same archive is under
    D_keras / 20, so the yardstick resolves the rounding.
What this holds is the accuracy, not each rounding point: with the attention's own roundings
(projections, heads' outputs, their gradients) taken out, the distances moved by under 1.5x
(measured), the roundings of the layers' inputs, outputs and output gradients dominating. The
rounding points are test_kernels' (test_attention_half: the probabilities' and dp's) and this
layer's code.
Token ids past what the 16-bit format holds (ids_case): an Embedding under a mixed policy reads
them as they are, as Keras' int32 input (mwtrain rounded the model's input, ids too, to 16 bits).
mixed_float16: mwtrain scales the loss by 2^15 (its first loss scale); Keras' gradient is taken
of the loss times the largest power of 2 that leaves its largest weight gradient under 2^12
(Keras' float16 weight gradients overflow past 65504), then divided by it.

usage: mha_mixed.py [all] [--only TEXT]  (MW_BUILDDIR names the build; CI's table leaves out the
Gemma decoders and ViT under mixed_float16, whose parts run in other cases: `all` runs them too;
--only: the cases whose name holds TEXT, for a developer's quick run)"""
import os
import sys
import subprocess

import jax

jax.config.update("jax_enable_x64", True)
import keras  # noqa: E402
import keras_hub  # noqa: E402
import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402

import oracle as o  # noqa: E402
from hub_llama import patch  # noqa: E402
from keras_hub.src.models.gemma.gemma_decoder_block import GemmaDecoderBlock  # noqa: E402

Llama = patch()

N, T, V, D, K, IMG = 32, 12, 50, 8, 3, 8
VB = 3000  # ids_case's vocabulary
LR = {"mixed_bfloat16": 2.0 ** 19, "mixed_float16": 2.0 ** 6, "ViT mixed_float16": 2.0 ** 3,
      "Gemma mixed_float16": 2.0 ** 3, "GemmaCausalLM mixed_float16": 2.0 ** 3}
FACTOR, CONTROL = 4.0, 20.0


def build(policy, kind):
    keras.config.set_dtype_policy(policy)
    keras.utils.set_random_seed(7)
    L = keras.layers
    if kind == "KerasHub ViT":
        bb = keras_hub.models.ViTBackbone(image_shape=(IMG, IMG, 3), patch_size=4, num_layers=2,
                                          num_heads=2, hidden_dim=D, mlp_dim=2 * D)
        m = keras_hub.models.ViTImageClassifier(backbone=bb, num_classes=K, preprocessor=None)
        m.compile(optimizer=keras.optimizers.SGD(1.0),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        keras.config.set_dtype_policy("float32")
        return m
    if kind.endswith("CausalLM"):  # KerasHub's task models: 2 blocks of width D
        fam = kind.split()[1][:-len("CausalLM")]
        common = dict(vocabulary_size=V, num_layers=2, hidden_dim=D, intermediate_dim=2 * D)
        bb = keras_hub.models.GemmaBackbone(num_query_heads=4, num_key_value_heads=2,
                                            head_dim=6, **common) if fam == "Gemma" else \
            keras_hub.models.LlamaBackbone(num_query_heads=4, num_key_value_heads=2,
                                           **common) if fam == "Llama" else \
            keras_hub.models.GPT2Backbone(num_heads=2, max_sequence_length=T + 2, dropout=0.0,
                                          **common)
        m = getattr(keras_hub.models, fam + "CausalLM")(backbone=bb, preprocessor=None)
        m.compile(optimizer=keras.optimizers.SGD(1.0),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        keras.config.set_dtype_policy("float32")
        return m
    inp = keras.Input((T,), dtype="int32", name="ids")
    x = L.Embedding(V, D, name="embed")(inp)
    if kind == "KerasHub tied ReversibleEmbedding":  # one layer called forward, then reverse
        tied = keras_hub.layers.ReversibleEmbedding(V, D, name="tied")
        x = keras_hub.layers.TransformerDecoder(16, 2, name="dec1")(tied(inp))
        m = keras.Model(inp, tied(x, reverse=True))
        m.compile(optimizer=keras.optimizers.SGD(1.0),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        keras.config.set_dtype_policy("float32")
        return m
    if kind == "KerasHub Llama decoders":
        for j in range(2):
            x = Llama(16, 4, num_key_value_heads=2, name=f"llama{j}")(x)
    elif kind == "KerasHub Gemma decoders, Sequential":
        m = keras.Sequential([keras.Input((T,), dtype="int32"), L.Embedding(V, D, name="embed"),
                              GemmaDecoderBlock(D, 16, 6, 4, 2, name="gem0"),
                              GemmaDecoderBlock(D, 16, 6, 4, 2, use_post_ffw_norm=True,
                                                use_post_attention_norm=True, logit_soft_cap=1.0,
                                                name="gem1"),
                              L.Dense(K, name="head")])
        m.compile(optimizer=keras.optimizers.SGD(1.0),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        keras.config.set_dtype_policy("float32")
        return m
    elif kind == "KerasHub Gemma decoders":
        x = GemmaDecoderBlock(D, 16, 6, 4, 2, name="gem0")(x)
        x = GemmaDecoderBlock(D, 16, 6, 4, 2, use_post_ffw_norm=True, use_post_attention_norm=True,
                              logit_soft_cap=1.0, use_sliding_window_attention=True,
                              sliding_window_size=3, name="gem1")(x)
    elif kind == "KerasHub decoders":
        x = keras_hub.layers.TransformerDecoder(16, 2, name="dec1")(x)
        x = keras_hub.layers.TransformerDecoder(16, 2, activation="gelu", normalize_first=True,
                                                name="dec2")(x)
    else:
        if kind == "KerasHub RotaryEmbedding":  # then the causal block
            x = keras_hub.layers.RotaryEmbedding(name="rope")(x)
        a = L.MultiHeadAttention(2, 4, name="att")(x, x, use_causal_mask=kind != "not causal")
        x = L.LayerNormalization(name="ln1")(L.Add(name="res1")([x, a]))
        f = L.Dense(D, name="ff2")(L.Dense(16, activation="gelu", name="ff1")(x))
        x = L.LayerNormalization(name="ln2")(L.Add(name="res2")([x, f]))
    m = keras.Model(inp, L.Dense(K, name="head")(x))
    m.compile(optimizer=keras.optimizers.SGD(1.0),
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    keras.config.set_dtype_policy("float32")
    return m


def gradient(model, xb, yb, out_dtype, scale):
    tv = [v.value for v in model.trainable_variables]
    ntv = [v.value for v in model.non_trainable_variables]

    def loss(t):
        pred, _ = model.stateless_call(t, ntv, xb, training=True)
        ce = keras.losses.sparse_categorical_crossentropy(yb, pred.astype(out_dtype),
                                                          from_logits=True)
        return ce.mean() * scale
    return [np.asarray(g, np.float64) / scale for g in jax.grad(loss)(tv)]


def rel_l2(gs, ref):
    num = sum(((g - r) ** 2).sum() for g, r in zip(gs, ref))
    return float(np.sqrt(num / sum((r ** 2).sum() for r in ref)))


def mw_gradient(work, path, data, w0, shapes, lr, *extra):
    dump = os.path.join(work, "w1.bin")
    p = subprocess.run([o.MWTRAIN, "train", "--model", path, "--data", data, "--epochs", "1",
                        "--batch-per-replica", str(N), "--no-shuffle", "--optimizer", "sgd",
                        "--momentum", "0", "--learning-rate", str(lr), "--test-examples", "8",
                        "--dump-weights", dump, "--summary-dir", "", "--checkpoint-every-epochs",
                        "0", "--progress", "none", "--threads", "1", *extra],
                       cwd=work, capture_output=True, text=True)
    if p.returncode != 0:
        return None, p.stderr.strip().splitlines()[-1] if p.stderr.strip() else "no message"
    w1 = np.fromfile(dump, "<f4").astype(np.float64)
    g = (w0 - w1[-w0.size:]) / lr
    cuts = np.cumsum([int(np.prod(s)) for s in shapes])[:-1]
    return [a.reshape(s) for a, s in zip(np.split(g, cuts), shapes)], ""


def bf16_cpu():
    with open("/proc/cpuinfo") as f:
        flags = f.read()
    return ("avx512_bf16" in flags or "amx_bf16" in flags) and \
        "ONEDNN_MAX_CPU_ISA" not in os.environ


def ids_case(work, policy, rng):
    """An Embedding of VB rows under a mixed policy reads token ids past what the 16-bit
    format holds (bfloat16 holds the integers to 256, float16 to 2048) as they are: the rows its
    gradient reaches are the ids' own, in Keras and in mwtrain (the reference backend, one SGD
    step of rate 1; control: the ids rounded to the format name other rows)."""
    keras.config.set_dtype_policy(policy)
    keras.utils.set_random_seed(3)
    inp = keras.Input((4,), dtype="int32", name="ids")
    x = keras.layers.Embedding(VB, D, name="embed")(inp)
    m = keras.Model(inp, keras.layers.Dense(K, name="head")(x))
    m.compile(optimizer=keras.optimizers.SGD(1.0),
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    keras.config.set_dtype_policy("float32")
    ids = (2 * rng.integers(1025, VB // 2, (N + 8, 4)) + 1).astype(np.int32)  # odd, past 2048
    y = (ids % K).astype(np.int32)
    data, path = (os.path.join(work, f"ids-{policy}.{e}") for e in ("npz", "keras"))
    np.savez(data, x_train=ids[:N], y_train=y[:N], x_test=ids[N:], y_test=y[N:])
    m.save(path)
    tv = m.trainable_variables
    w0 = np.concatenate([np.asarray(v.value, np.float64).ravel() for v in tv])
    gk = gradient(m, ids[:N], y[:N], "float32", 1.0)
    gm, err = mw_gradient(work, path, data, w0, [tuple(v.shape) for v in tv], 1.0,
                          "--backend", "ref", "--dtype-policy", policy)
    if not o.check(gm is not None, f"{policy}, ids past 2048: mwtrain trains: {err}"):
        return
    want = sorted(set(ids[:N].ravel().tolist()))
    rows = [sorted(np.nonzero(np.abs(g[0]).sum(1))[0].tolist()) for g in (gk, gm)]
    r16 = ml_dtypes.bfloat16 if policy == "mixed_bfloat16" else np.float16
    rounded = sorted(set(ids[:N].astype(np.float32).astype(r16).astype(np.float32).astype(int)
                         .ravel().tolist()))
    o.check(rows[0] == want and rows[1] == want and rounded != want,
            f"{policy}, ids past 2048: the embedding rows the gradient reaches are the ids' "
            f"{len(want)} rows (Keras {rows[0] == want}, mwtrain {rows[1] == want}); control: "
            f"the ids rounded to {policy[6:]} name others ({rounded != want})")


FULL = "all" in sys.argv[1:]
ONLY = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv[:-1] else ""


def main():
    work = o.workdir()
    rng = np.random.default_rng(5)
    x = rng.integers(1, V, (N + 8, T)).astype(np.int32)
    y = (x % K + (rng.random((N + 8, T)) < 0.2)).astype(np.int32) % K
    tokens = os.path.join(work, "tokens.npz")
    np.savez(tokens, x_train=x[:N], y_train=y[:N], x_test=x[N:], y_test=y[N:])
    # GemmaCausalLM's named inputs: the same ids, no padding
    named = os.path.join(work, "named.npz")
    ones = np.ones_like(x, bool)
    np.savez(named, **{"x_train.token_ids": x[:N], "x_train.padding_mask": ones[:N],
                       "x_test.token_ids": x[N:], "x_test.padding_mask": ones[N:],
                       "y_train": y[:N], "y_test": y[N:]})
    # ViT: random images labelled by the brightest quadrant's channel
    img = rng.random((N + 8, IMG, IMG, 3)).astype(np.float32)
    lab = np.argmax(img[:, :IMG // 2, :IMG // 2, :].mean((1, 2)), -1).astype(np.int32)
    images = os.path.join(work, "images.npz")
    np.savez(images, x_train=img[:N], y_train=lab[:N], x_test=img[N:], y_test=lab[N:])
    print(f"{'case':34s} {'D (rel. L2 to float64)':>22s}  D / D_keras")
    for kind in ("causal", "not causal", "KerasHub RotaryEmbedding", "KerasHub decoders",
                 "KerasHub Llama decoders", "KerasHub Gemma decoders",
                 "KerasHub Gemma decoders, Sequential", "KerasHub GemmaCausalLM",
                 "KerasHub LlamaCausalLM", "KerasHub GPT2CausalLM",
                 "KerasHub tied ReversibleEmbedding", "KerasHub ViT"):
        if ONLY not in kind:
            continue
        data, xb, yb = (images, img[:N], lab[:N]) if kind == "KerasHub ViT" else \
            (named, {"token_ids": x[:N], "padding_mask": ones[:N]}, y[:N]) if "CausalLM" in kind \
            else (tokens, x[:N], y[:N])
        # under mixed_float16 the other decoders' evaluation overflows (see above); the
        # Llama and GPT2 task models and the tied layer run one policy (CI's time: their
        # reverse call and named inputs are the GemmaCausalLM's, which runs both)
        one = ("decoders" in kind and "Gemma" not in kind) or kind.endswith(
            ("LlamaCausalLM", "GPT2CausalLM", "ReversibleEmbedding"))
        # CI's table leaves out two mixed_float16 cases whose parts run elsewhere under
        # mixed_float16: the Gemma decoders' (GemmaCausalLM's blocks here; the soft cap's and
        # the window's float16 scores bit for bit in test_attention's scores16) and ViT's
        # (its patches' convolution and class token are its mixed_bfloat16 case's; float16's
        # roundings, the other cases'); `mha_mixed.py all` runs them (measured 0.71x and
        # 0.96x of D_keras)
        one = one or (not FULL and kind in ("KerasHub Gemma decoders", "KerasHub ViT")) or \
            kind.endswith("Sequential")
        for policy in ("mixed_bfloat16", "mixed_float16")[:1 if one else 2]:
            case = f"{policy}, {kind}"
            m = build(policy, kind)
            o.check(all(l.dtype_policy.name == policy for l in m.layers
                        if not isinstance(l, keras.layers.InputLayer)),
                    f"{case}: Keras built every layer with {policy}")
            path = os.path.join(work, f"{policy}-{kind.replace(' ', '_')}.keras")
            m.save(path)
            m64 = build("float64", kind)
            for v64, v in zip(m64.weights, m.weights):
                v64.assign(np.asarray(v.value, np.float64))
            g64 = gradient(m64, xb, yb, "float64", 1.0)
            # Keras' float16 weight gradients overflow past 65504: its loss scale leaves the
            # largest of them at 2^12 at most
            big = max(float(np.abs(g).max()) for g in g64)
            scale = 1.0 if policy == "mixed_bfloat16" else 2.0 ** np.floor(np.log2(4096 / big))
            gk = gradient(m, xb, yb, "float32", scale)
            names = [v.path for v in m.trainable_variables]
            shapes = [tuple(v.shape) for v in m.trainable_variables]
            w0 = np.concatenate([np.asarray(v.value, np.float64).ravel()
                                 for v in m.trainable_variables])
            dk = rel_l2(gk, g64)
            print(f"  {case + ': Keras':32s} {dk:22.3e}  1")
            runs = [("ref", ["--backend", "ref"]), ("f32 control", ["--dtype-policy", "float32"])]
            if policy == "mixed_bfloat16" and bf16_cpu():
                runs.insert(1, ("cpu", []))
            for tag, extra in runs:
                fam = kind.split()[1] if kind.startswith("KerasHub") else ""
                lr = LR.get(f"{fam} {policy}", LR[policy])
                gm, err = mw_gradient(work, path, data, w0, shapes, lr, *extra)
                if not o.check(gm is not None, f"{case}: mwtrain {tag} trains: {err}"):
                    continue
                dm = rel_l2(gm, g64)
                print(f"  {case + ': mwtrain ' + tag:32s} {dm:22.3e}  {dm / dk:.3g}")
                if tag == "f32 control":
                    o.check(dm * CONTROL <= dk, f"{case}: control: mwtrain float32 {dm:.2e} "
                            f"<= D_keras / {CONTROL:g} ({dk / CONTROL:.2e})")
                    continue
                mats = [i for i, n in enumerate(names) if not n.endswith("/bias")]
                dmm, dkm = (rel_l2([g[i] for i in mats], [g64[i] for i in mats]) for g in (gm, gk))
                o.check(dkm / FACTOR <= dmm <= FACTOR * dkm,
                        f"{case}: mwtrain {tag}, the kernels, embeddings and norms: {dmm:.2e} "
                        f"within {FACTOR:g}x of Keras' own {dkm:.2e}")
                for name, a, b, r in zip(names, gm, gk, g64):
                    da, db = rel_l2([a], [r]), rel_l2([b], [r])
                    if name.endswith("key/bias"):
                        continue
                    if name.endswith("/bias"):
                        o.check(da <= FACTOR * db + 1e-6, f"{case}: mwtrain {tag}, {name}: "
                                f"{da:.2e} <= {FACTOR:g} x Keras' {db:.2e} + 1e-6")
                    else:
                        o.check(db / FACTOR <= da <= FACTOR * db, f"{case}: mwtrain {tag}, "
                                f"{name}: {da:.2e} within {FACTOR:g}x of Keras' {db:.2e}")
    for policy in ("mixed_bfloat16", "mixed_float16"):
        ids_case(work, policy, rng)
    o.finish()


main()
