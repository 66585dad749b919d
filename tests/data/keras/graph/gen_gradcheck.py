"""Writes fifteen of the gradient-check models beside it with Keras 3 and KerasHub (the oracle
venv of tests/keras/venv.sh; run from the repository root):
    KERAS_BACKEND=jax python tests/data/keras/graph/gen_gradcheck.py [NAME...]
(NAME: act, norm, tokens, tokens_pos, misc, tokens_fn, se, apps, rms, tokens_rope, tokens_tied,
tokens_untied, llama, vit, gemma; none: all)
gradcheck_act.json: the activation classes (LeakyReLU, ELU) reading one convolution, added,
GlobalAveragePooling2D and a Softmax layer between two Dense. gradcheck_norm.json:
GroupNormalization in 3 groups and per channel (groups -1, no beta) after convolutions, then
EinsumDense on a sequence (bias_axes "d") and on a flat input (no bias). gradcheck_tokens.json and
gradcheck_tokens_pos.json: models of 784 token ids below 20 (the gradient check feeds a
28 x 28 image's worth of ids): Embedding, Conv1D and the 1-D poolings (averaging before
the max pooling, so that few pooling choices flip under a parameter's step); KerasHub's
TokenAndPositionEmbedding, PositionEmbedding and SinePositionEncoding added, then a global
max (a global average would scale each position's gradient by 1/784, below what a central
difference in float32 resolves). gradcheck_tokens_fn.json: gradcheck_tokens' layers as a
Functional model (a layer accepts the same input whatever the model's kind).
gradcheck_se.json: the broadcasting merges: a squeeze-and-excitation block (a (None, 1, 1, C)
gate times (None, H, W, C)), a flat (None, C) added to and multiplied with (None, H, W, C), a
residual sum written as x + y (an operation node of keras.src.ops.numpy). gradcheck_apps.json:
keras.applications' LayerScale in a nested Sequential, StochasticDepth (rate 0) and
CustomScaleLayer in a nested Functional with a Dense on the image, and the constants of
y * 0.5 + 1.0 (operation nodes) and of a product by a scalar tensor (KerasHub's GemmaBackbone
scales its embeddings so: Keras writes the operand as a __tensor__). gradcheck_misc.json: ReLU with max_value, negative_slope and
threshold, hard_silu and hard_sigmoid (a convolution drawn with stddev 0.8 puts inputs on every
piece), a sequence's SpatialDropout1D, SpatialDropout2D, a Dropout with a mask per example
(noise_shape (None, 1, 1, 1)), Rescaling and an adapted Normalization (its statistics weights:
mean 0, variance 1 before adapt()) after other layers, the global poolings with keepdims, a
Reshape to flat. gradcheck_rms.json: the RMS normalizations: Keras' RMSNormalization and
LayerNormalization(rms_scaling=True) on an image's pixels, KerasHub's LlamaLayerNorm and Gemma's
RMSNormalization on a sequence, RMSNormalization(epsilon=1e-3) on a flat input.
gradcheck_tokens_rope.json: KerasHub's RotaryEmbedding on 49 averaged steps of token embeddings, at its defaults and at max_wavelength 100, scaling_factor 2, denominator_dim
6, then a Dense on each position (its gradient reaches the table only through both
rotations). gradcheck_llama.json: a Dense on each of 28 steps, then KerasHub's
LlamaTransformerDecoder twice: 4 query heads on 2 key heads (rope_max_wavelength 100, silu) and 2
on 1 (gelu), made savable by tests/keras/hub_llama.py; the pooling, a Dense.
gradcheck_vit.json: KerasHub's ViTPatchingAndEmbedding (7x7 patches of the 28x28
image, a class token), a ViTEncoderBlock without biases, a ViTEncoder of one block with dropout
(0.1 of the attention's probabilities, of the input and of both branches), the class token's
features by x[:, 0] (a GetItem operation node) added to the mean over the steps (ops.mean, a
Mean operation node) and a Dense. gradcheck_gemma.json: a Dense on each of 28 steps, then
KerasHub's GemmaDecoderBlock twice: 4 query heads of head_dim 6 on 2 key heads with Gemma 2's
post norms, and 2 of head_dim 4 on 1 (epsilon 1e-5); the pooling, a Dense."""
import json
import os
import sys

import keras
import keras_hub
from keras import initializers, layers
from keras.src.applications.convnext import LayerScale, StochasticDepth
from keras.src.applications.inception_resnet_v2 import CustomScaleLayer

HERE = os.path.dirname(os.path.abspath(__file__))


def act():
    inp = keras.Input((28, 28, 1), name="in")
    c = layers.Conv2D(4, 5, strides=3, name="c1",
                      bias_initializer=initializers.RandomNormal(stddev=0.1))(inp)
    a = layers.LeakyReLU(negative_slope=0.2, name="leaky")(c)
    b = layers.ELU(alpha=0.8, name="elu")(c)
    s = layers.Add(name="add")([a, b])
    g = layers.GlobalAveragePooling2D(name="gap")(s)
    d = layers.Dense(6, name="d1", bias_initializer=initializers.RandomNormal(stddev=0.1))(g)
    d = layers.Softmax(name="sm")(d)
    out = layers.Dense(10, activation="softmax", name="out")(d)
    return keras.Model(inp, out, name="gradcheck_act")


def norm():
    inp = keras.Input((28, 28, 1), name="in")
    c = layers.Conv2D(6, 5, strides=3, name="c1",
                      bias_initializer=initializers.RandomNormal(stddev=0.1))(inp)
    g = layers.GroupNormalization(groups=3, name="gn3",
                                  gamma_initializer=initializers.RandomUniform(0.5, 1.5),
                                  beta_initializer=initializers.RandomNormal(stddev=0.3))(c)
    g = layers.Conv2D(4, 3, name="c2")(g)
    g = layers.GroupNormalization(groups=-1, center=False, name="inorm",
                                  gamma_initializer=initializers.RandomUniform(0.5, 1.5))(g)
    s = layers.Reshape((36, 4), name="seq")(g)
    s = layers.EinsumDense("abc,cd->abd", output_shape=(36, 5), bias_axes="d", name="ed1",
                           bias_initializer=initializers.RandomNormal(stddev=0.1))(s)
    d = layers.EinsumDense("ab,bc->ac", output_shape=10, activation="softmax", name="out")(
        layers.Flatten(name="flat")(s))
    return keras.Model(inp, d, name="gradcheck_norm")


def tokens():
    return keras.Sequential([
        keras.Input((784,), dtype="int32", name="ids"),
        layers.Embedding(20, 4, embeddings_initializer=initializers.RandomNormal(stddev=1.0),
                         name="emb"),
        layers.Conv1D(4, 5, strides=4, padding="same", name="conv",
                      bias_initializer=initializers.RandomNormal(stddev=0.1)),
        layers.AveragePooling1D(4, name="ap"),
        layers.MaxPooling1D(7, name="mp"),
        layers.GlobalMaxPooling1D(name="gmp"),
        layers.Dense(10, activation="softmax", name="out"),
    ], name="gradcheck_tokens")


def tokens_pos():
    ids = keras.Input((784,), dtype="int32", name="ids")
    x = keras_hub.layers.TokenAndPositionEmbedding(20, 784, 4, name="tok_pos")(ids)
    p = keras_hub.layers.PositionEmbedding(sequence_length=784, name="pos")(x)
    s = keras_hub.layers.SinePositionEncoding(name="sine")(x)
    x = layers.Add(name="add_pos")([x, p])
    x = layers.Add(name="add_sine")([x, s])
    x = layers.GlobalMaxPooling1D(name="gmp")(x)
    out = layers.Dense(10, activation="softmax", name="out")(x)
    return keras.Model(ids, out, name="gradcheck_tokpos")


def tokens_fn():
    ids = keras.Input((784,), dtype="int32", name="ids")
    x = layers.Embedding(20, 4, embeddings_initializer=initializers.RandomNormal(stddev=1.0),
                         name="emb")(ids)
    x = layers.Conv1D(4, 5, strides=4, padding="same", name="conv",
                      bias_initializer=initializers.RandomNormal(stddev=0.1))(x)
    x = layers.AveragePooling1D(4, name="ap")(x)
    x = layers.MaxPooling1D(7, name="mp")(x)
    x = layers.GlobalMaxPooling1D(name="gmp")(x)
    out = layers.Dense(10, activation="softmax", name="out")(x)
    return keras.Model(ids, out, name="gradcheck_tokens_fn")


def se():
    inp = keras.Input((28, 28, 1), name="in")
    x = layers.Conv2D(6, 5, strides=3, activation="tanh", name="c1",
                      bias_initializer=initializers.RandomNormal(stddev=0.1))(inp)
    s = layers.GlobalAveragePooling2D(keepdims=True, name="squeeze")(x)
    s = layers.Conv2D(6, 1, activation="sigmoid", name="excite",
                      bias_initializer=initializers.RandomNormal(stddev=0.1))(s)
    x = layers.Multiply(name="se")([s, x])
    f = layers.Dense(6, name="d1", bias_initializer=initializers.RandomNormal(stddev=0.1))(
        layers.GlobalMaxPooling2D(name="gmp")(x))
    y = layers.Add(name="shift")([x, f])
    y = layers.Multiply(name="gate")([y, layers.Activation("sigmoid", name="sig")(f)])
    y = layers.Conv2D(6, 3, padding="same", name="c2")(y) + y
    out = layers.Dense(10, activation="softmax", name="out")(layers.Flatten(name="flat")(y))
    return keras.Model(inp, out, name="gradcheck_se")


def apps():
    inp = keras.Input((28, 28, 1), name="in")
    stem = keras.Sequential([
        keras.Input((28, 28, 1)),
        layers.Conv2D(6, 5, strides=5, activation="tanh", name="c1",
                      bias_initializer=initializers.RandomNormal(stddev=0.1)),
        LayerScale(0.7, 6, name="ls"),
    ], name="stem")
    bi = keras.Input((5, 5, 6), name="block_in")
    r = layers.Dense(6, name="pw", bias_initializer=initializers.RandomNormal(stddev=0.1))(bi)
    r = StochasticDepth(0.0, name="drop_path")(r)
    block = keras.Model(bi, CustomScaleLayer(0.3, name="scaled")([bi, r]), name="block")
    y = block(stem(inp))
    y = y * 0.5 + 1.0
    y = y * keras.ops.cast(keras.ops.sqrt(2.0), "float32")  # written as a __tensor__
    out = layers.Dense(10, activation="softmax", name="out")(layers.Flatten(name="flat")(y))
    return keras.Model(inp, out, name="gradcheck_apps")


def misc():
    inp = keras.Input((28, 28, 1), name="in")
    c = layers.Conv2D(4, 5, strides=3, name="c1",
                      kernel_initializer=initializers.RandomNormal(stddev=0.8),
                      bias_initializer=initializers.RandomNormal(stddev=0.1))(inp)
    a = layers.ReLU(max_value=0.8, negative_slope=0.2, threshold=0.1, name="relux")(c)
    b = layers.Activation("hard_silu", name="hsilu")(c)
    h = layers.Activation("hard_sigmoid", name="hsig")(c)
    s = layers.Add(name="add")([a, b, h])
    s = layers.Reshape((64, 4), name="seq")(s)
    s = layers.SpatialDropout1D(0.2, name="sdrop1")(s)
    s = layers.Reshape((8, 8, 4), name="img")(s)
    s = layers.SpatialDropout2D(0.2, name="sdrop2")(s)
    s = layers.Dropout(0.2, noise_shape=(None, 1, 1, 1), name="depth_drop")(s)
    s = layers.Rescaling(0.5, offset=-0.25, name="resc")(s)
    s = layers.Normalization(name="norm")(s)
    g1 = layers.GlobalAveragePooling2D(keepdims=True, name="gap")(s)
    g2 = layers.GlobalMaxPooling2D(keepdims=True, name="gmp")(s)
    g = layers.Reshape((4,), name="flat")(layers.Add(name="add_pools")([g1, g2]))
    out = layers.Dense(10, activation="softmax", name="out")(g)
    return keras.Model(inp, out, name="gradcheck_misc")


def rope():
    return keras.Sequential([
        keras.Input((784,), dtype="int32", name="ids"),
        layers.Embedding(20, 8, embeddings_initializer=initializers.RandomNormal(stddev=1.0),
                         name="emb"),
        layers.AveragePooling1D(16, name="ap"),
        keras_hub.layers.RotaryEmbedding(name="rope"),
        keras_hub.layers.RotaryEmbedding(max_wavelength=100, scaling_factor=2.0,
                                         denominator_dim=6, name="rope2"),
        layers.Dense(6, activation="tanh", name="pos_ff",
                     bias_initializer=initializers.RandomNormal(stddev=0.1)),
        layers.GlobalMaxPooling1D(name="gmp"),
        layers.Dense(10, activation="softmax", name="out"),
    ], name="gradcheck_rope")


def rms():
    from keras_hub.src.models.gemma.rms_normalization import RMSNormalization as GemmaRMS
    from keras_hub.src.models.llama.llama_layernorm import LlamaLayerNorm
    inp = keras.Input((28, 28, 1), name="in")
    c = layers.Conv2D(6, 5, strides=3, name="c1",
                      bias_initializer=initializers.RandomNormal(stddev=0.1))(inp)
    c = layers.RMSNormalization(name="rms_img")(c)
    c = layers.LayerNormalization(rms_scaling=True, name="ln_rms",
                                  gamma_initializer=initializers.RandomUniform(0.5, 1.5))(c)
    s = layers.Reshape((64, 6), name="seq")(c)
    s = LlamaLayerNorm(name="llama")(s)
    s = GemmaRMS(name="gemma")(s)
    f = layers.RMSNormalization(epsilon=1e-3, name="rms_flat")(layers.Flatten(name="flat")(s))
    out = layers.Dense(10, activation="softmax", name="out")(f)
    return keras.Model(inp, out, name="gradcheck_rms")


def vit():
    from keras_hub.src.models.vit.vit_layers import (ViTEncoder, ViTEncoderBlock,
                                                     ViTPatchingAndEmbedding)
    inp = keras.Input((28, 28, 1), name="in")
    x = ViTPatchingAndEmbedding(image_size=(28, 28), patch_size=(7, 7), hidden_dim=8,
                                num_channels=1, name="patches")(inp)
    x = ViTEncoderBlock(num_heads=2, hidden_dim=8, mlp_dim=12, use_mha_bias=False,
                        use_mlp_bias=False, name="block")(x)
    x = ViTEncoder(num_layers=1, num_heads=2, hidden_dim=8, mlp_dim=16, dropout_rate=0.1,
                   attention_dropout=0.1, name="encoder")(x)
    pooled = layers.Add(name="token_and_mean")([x[:, 0], keras.ops.mean(x, axis=[1])])
    out = layers.Dense(10, activation="softmax", name="out")(pooled)
    return keras.Model(inp, out, name="gradcheck_vit")


def tokens_tied(tie=True):
    """KerasHub's ReversibleEmbedding called forward on the ids and, after the pooling and a
    Dense, in reverse (its table's transpose: logits over the 20 ids) before the output Dense:
    the table gets both calls' gradients (tokens_untied: tie_weights=False, the reverse call's
    own kernel after the table). Keras writes the second call as a second inbound node of the
    same entry, read by the layers after it as ["tok", 1, 0]: the file is Keras' own."""
    ids = keras.Input((784,), dtype="int32", name="ids")
    tok = keras_hub.layers.ReversibleEmbedding(
        20, 4, embeddings_initializer=initializers.RandomNormal(stddev=1.0), name="tok",
        tie_weights=tie)
    x = layers.AveragePooling1D(4, name="ap")(tok(ids))
    x = layers.MaxPooling1D(7, name="mp")(x)
    x = layers.GlobalMaxPooling1D(name="gmp")(x)
    x = layers.Dense(4, activation="tanh", name="h")(x)
    out = layers.Dense(10, activation="softmax", name="out")(tok(x, reverse=True))
    return keras.Model(ids, out, name="gradcheck_tokens_tied" if tie else "gradcheck_untied")


def llama():
    sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "keras"))
    from hub_llama import patch
    Llama = patch()
    inp = keras.Input((784,), name="in")
    s = layers.Reshape((28, 28), name="seq")(inp)
    s = layers.Dense(8, name="proj", bias_initializer=initializers.RandomNormal(stddev=0.1))(s)
    s = Llama(12, 4, num_key_value_heads=2, rope_max_wavelength=100, name="gqa")(s)
    s = Llama(12, 2, num_key_value_heads=1, activation="gelu", name="mqa")(s)
    g = layers.GlobalAveragePooling1D(name="pool")(s)
    return keras.Model(inp, layers.Dense(10, activation="softmax", name="out")(g),
                       name="gradcheck_llama")


def gemma():
    from keras_hub.src.models.gemma.gemma_decoder_block import GemmaDecoderBlock
    inp = keras.Input((784,), name="in")
    s = layers.Reshape((28, 28), name="seq")(inp)
    s = layers.Dense(8, name="proj", bias_initializer=initializers.RandomNormal(stddev=0.1))(s)
    s = GemmaDecoderBlock(8, 12, 6, 4, 2, use_post_attention_norm=True, use_post_ffw_norm=True,
                          name="gqa")(s)
    s = GemmaDecoderBlock(8, 8, 4, 2, 1, layer_norm_epsilon=1e-5, name="mqa")(s)
    g = layers.GlobalAveragePooling1D(name="pool")(s)
    return keras.Model(inp, layers.Dense(10, activation="softmax", name="out")(g),
                       name="gradcheck_gemma")


MODELS = (("act", act), ("norm", norm), ("tokens", tokens), ("tokens_pos", tokens_pos),
          ("misc", misc), ("tokens_fn", tokens_fn), ("se", se), ("apps", apps), ("rms", rms))
MODELS += (("tokens_rope", rope), ("tokens_tied", tokens_tied),
           ("tokens_untied", lambda: tokens_tied(False)), ("llama", llama), ("vit", vit),
           ("gemma", gemma))
for name, make in MODELS:
    if len(sys.argv) > 1 and name not in sys.argv[1:]:  # only the models named
        continue
    with open(os.path.join(HERE, f"gradcheck_{name}.json"), "w") as f:
        m = make()
        f.write(json.dumps(m) if isinstance(m, dict) else m.to_json())
