"""Every key Keras 3.15 writes for a class mwtrain reads is read, or refused by name.

For each class mwtrain reads (the layer table's classes, as mwtrain lists them in its message
for an unknown class, the preprocessing layers and KerasHub's), the class is built with default
arguments inside a minimal model Keras itself writes (model.to_json()); then, for every key of
the layer's get_config(), the model is written again with that one key at a value other than
its default, and `mwtrain summary --model FILE` must either accept it (a key mwtrain
implements, or one that does not change the math) or refuse it with exit 2 and a message that
names the layer, the key and the value. A key mwtrain's table for the class does not list is
refused with "is not a key mwtrain knows": that fails this test, so a key a later Keras adds
cannot pass unnoticed. The same for the initializers' and the regularizers' config keys, and
for a compiled .keras archive's compile_config.

The control: a key Keras does not write (a made-up one) must be refused as unknown.

    tests/keras/run.sh keras_keys.py
"""
import copy
import json
import os
import re
import subprocess
import tempfile
import zipfile
from concurrent.futures import ThreadPoolExecutor

from oracle import MWTRAIN, check, finish, keras
import keras_hub
from keras.src.applications.convnext import LayerScale, StochasticDepth
from keras.src.applications.inception_resnet_v2 import CustomScaleLayer
from keras_hub.src.models.gemma.rms_normalization import RMSNormalization as GemmaRMS
from keras_hub.src.models.gemma.gemma_decoder_block import GemmaDecoderBlock
from keras_hub.src.models.llama.llama_layernorm import LlamaLayerNorm
from keras_hub.src.models.vit.vit_layers import (ViTEncoder, ViTEncoderBlock,
                                                 ViTPatchingAndEmbedding)
from keras.src.ops.numpy import Mean
from hub_llama import patch as llama_savable

L = keras.layers
UNKNOWN = "is not a key mwtrain knows"

# Keys every layer has, read by the model reader itself (tested by its own bad-config table).
COMMON = {"name", "dtype"}
# A value other than the default, where the rule below (flip a bool, +1, x 0.5) does not fit.
VALUES = {
    "padding": "same",
    "data_format": "channels_first",
    "activation": "relu",
    "kernel_size": [2, 2],
    "strides": [2, 2],
    "pool_size": [1, 1],
    "dilation_rate": [2, 2],
    "cropping": [[1, 1], [1, 1]],
    "noise_shape": [None, 1, 1, 1],
    "target_shape": [1, 4],
    "fill_mode": "nearest",
    "interpolation": "nearest",
    "mode": "horizontal",
    "axis": 1,
    "mean": 0.25,
    "variance": 2.0,
    "output_shape": 5,
    "attention_axes": [2],
    "sliding_window": 4,
    "seed": 7,
    "max_value": 6.0,
    "batch_shape": [None, 8, 8, 2],
    "encoder_sequence_shape": [None, 6, 8],
    "decoder_sequence_shape": [None, 6, 8],
    "quantization_config": {"mode": "int8"},
    "renorm_clipping": {"rmax": 3.0},
    "input_axes": [0],
    "equation": "ab,bcd->acd",
    "bias_axes": "b",
    "output_axes": [1],
    "drop_path_rate": 0.1,
    "rope_type": "yarn",
    "size": [3, 2],
    "image_size": [4, 4],
    "patch_size": [2, 2],
}
# The value where VALUES' is the class's own default (UpSampling2D's interpolation "nearest").
VALUES_ALT = {"interpolation": "bilinear"}
INIT_VALUES = {"mode": "fan_out", "distribution": "uniform"}  # in initializers' configs
REGULARIZER = {"module": "keras.regularizers", "class_name": "L2", "config": {"l2": 0.01},
               "registered_name": None}
INITIALIZER = {"module": "keras.initializers", "class_name": "HeNormal",
               "config": {"seed": None}, "registered_name": None}


def other_value(key, v):
    if key in VALUES:
        return VALUES[key] if VALUES[key] != v else VALUES_ALT.get(key, VALUES[key])
    if key.endswith("_regularizer"):
        return REGULARIZER
    if key.endswith("_constraint"):
        return {"module": "keras.constraints", "class_name": "NonNeg", "config": {},
                "registered_name": None}
    if key.endswith("initializer"):
        return INITIALIZER
    if isinstance(v, bool):
        return not v
    if isinstance(v, int):
        return v + 1
    if isinstance(v, float):
        return v * 0.5 if v else 0.5
    if v is None:
        return 2
    raise KeyError(f"no other value for {key}={v!r}: add one to VALUES")


def renderings(v):
    """How mwtrain's messages show a value (worker/keras/keras_layer.c mw_kdescribe, and the
    readers' own forms)."""
    out = {json.dumps(v), json.dumps(v, separators=(",", ":")), str(v)}
    if isinstance(v, bool):
        out.add("true" if v else "false")
    elif isinstance(v, (int, float)):
        out.add(f"{v:g}")
    elif isinstance(v, str):
        out.add(f'"{v}"')
    elif isinstance(v, list):
        out.add(f"an array of {len(v)}")
        if len(v) == 1:  # "attention_axes: found axis 2", "metric 'mae'"
            out.update({f"axis {v[0]}", f"'{v[0]}'"})
        out.add("[" + ", ".join(json.dumps(x) for x in v) + "]")
    elif isinstance(v, dict):
        out.add("an object")
        out.add(v.get("class_name", "?"))
    return out


def seq(*layers, shape=(8, 8, 1), dtype="float32"):
    return keras.Sequential([keras.Input(shape, dtype=dtype), *layers])


def tokens(layer):
    return seq(L.Embedding(10, 8), layer, L.GlobalAveragePooling1D(), L.Dense(3), shape=(6,),
               dtype="int32")


def image(layer):
    return seq(layer, L.Flatten(), L.Dense(3))


def functional(make):
    inp = keras.Input((6,), dtype="int32")
    x = L.Embedding(10, 8)(inp)
    x = make(x)
    return keras.Model(inp, L.Dense(3)(L.GlobalAveragePooling1D()(x)))


def merge(cls):
    inp = keras.Input((4,))
    return keras.Model(inp, L.Dense(3)(cls()([L.Dense(3)(inp), L.Dense(3)(inp)])))


def scaled_sum():
    inp = keras.Input((8, 8, 1))
    x = CustomScaleLayer(0.17, name="x")([L.Conv2D(2, 1)(inp), L.Conv2D(2, 1)(inp)])
    return keras.Model(inp, L.Dense(3)(L.Flatten()(x)))


hub = keras_hub.layers
# class -> (the model around it, the layer's name in it)
HOSTS = {
    "Conv2D": lambda: image(L.Conv2D(2, 3, name="x")),
    "Conv1D": lambda: tokens(L.Conv1D(4, 3, name="x")),
    "DepthwiseConv2D": lambda: image(L.DepthwiseConv2D(3, name="x")),
    "SeparableConv2D": lambda: image(L.SeparableConv2D(2, 3, name="x")),
    "MaxPooling2D": lambda: image(L.MaxPooling2D(name="x")),
    "AveragePooling2D": lambda: image(L.AveragePooling2D(2, name="x")),
    "MaxPooling1D": lambda: tokens(L.MaxPooling1D(name="x")),
    "AveragePooling1D": lambda: tokens(L.AveragePooling1D(2, name="x")),
    # Flatten: keepdims=True gives (None, 1, 1, C)
    "GlobalMaxPooling2D": lambda: seq(L.GlobalMaxPooling2D(name="x"), L.Flatten(), L.Dense(3)),
    "GlobalAveragePooling2D": lambda: seq(L.GlobalAveragePooling2D(name="x"), L.Flatten(),
                                          L.Dense(3)),
    "GlobalMaxPooling1D": lambda: seq(L.Embedding(10, 8), L.GlobalMaxPooling1D(name="x"),
                                      L.Flatten(), L.Dense(3), shape=(6,), dtype="int32"),
    "GlobalAveragePooling1D": lambda: seq(L.Embedding(10, 8), L.GlobalAveragePooling1D(name="x"),
                                          L.Flatten(), L.Dense(3), shape=(6,), dtype="int32"),
    "Flatten": lambda: seq(L.Flatten(name="x"), L.Dense(3)),
    "Reshape": lambda: seq(L.Reshape((4, 1), name="x"), L.Flatten(), L.Dense(3), shape=(4,)),
    "Dense": lambda: seq(L.Dense(3, name="x"), shape=(4,)),
    "ReLU": lambda: image(L.ReLU(name="x")),
    "Dropout": lambda: image(L.Dropout(0.1, name="x")),
    "SpatialDropout2D": lambda: image(L.SpatialDropout2D(0.1, name="x")),
    "SpatialDropout1D": lambda: tokens(L.SpatialDropout1D(0.1, name="x")),
    "Activation": lambda: image(L.Activation("linear", name="x")),
    "Softmax": lambda: seq(L.Dense(3), L.Softmax(name="x"), shape=(4,)),
    "BatchNormalization": lambda: image(L.BatchNormalization(name="x")),
    "ZeroPadding2D": lambda: image(L.ZeroPadding2D(name="x")),
    "Cropping2D": lambda: image(L.Cropping2D(name="x")),
    "Conv2DTranspose": lambda: image(L.Conv2DTranspose(2, 3, name="x")),
    "UpSampling2D": lambda: image(L.UpSampling2D(name="x")),
    "Add": lambda: merge(lambda: L.Add(name="x")),
    "Multiply": lambda: merge(lambda: L.Multiply(name="x")),
    "Concatenate": lambda: merge(lambda: L.Concatenate(name="x")),
    "LeakyReLU": lambda: image(L.LeakyReLU(name="x")),
    "ELU": lambda: image(L.ELU(name="x")),
    "Embedding": lambda: seq(L.Embedding(10, 8, name="x"), L.GlobalAveragePooling1D(),
                             L.Dense(3), shape=(6,), dtype="int32"),
    "TokenAndPositionEmbedding": lambda: seq(
        hub.TokenAndPositionEmbedding(10, 6, 8, name="x"), L.GlobalAveragePooling1D(),
        L.Dense(3), shape=(6,), dtype="int32"),
    # its forward call (the reverse call is no config of its own: tests/keras/hub_models.py)
    "ReversibleEmbedding": lambda: seq(
        hub.ReversibleEmbedding(10, 8, name="x"), L.GlobalAveragePooling1D(), L.Dense(3),
        shape=(6,), dtype="int32"),
    "LayerNormalization": lambda: image(L.LayerNormalization(name="x")),
    "GroupNormalization": lambda: image(L.GroupNormalization(groups=1, name="x")),
    "RMSNormalization": lambda: tokens(L.RMSNormalization(name="x")),
    "LlamaLayerNorm": lambda: tokens(LlamaLayerNorm(name="x")),
    "EinsumDense": lambda: seq(L.EinsumDense("ab,bc->ac", output_shape=3, bias_axes="c",
                                             name="x"), shape=(4,)),
    "MultiHeadAttention": lambda: functional(
        lambda x: L.MultiHeadAttention(2, 4, name="x")(x, x)),
    "TransformerEncoder": lambda: tokens(hub.TransformerEncoder(16, 2, name="x")),
    "TransformerDecoder": lambda: tokens(hub.TransformerDecoder(16, 2, name="x")),
    "PositionEmbedding": lambda: functional(
        lambda x: L.Add()([x, hub.PositionEmbedding(6, name="x")(x)])),
    "SinePositionEncoding": lambda: functional(
        lambda x: L.Add()([x, hub.SinePositionEncoding(name="x")(x)])),
    "RotaryEmbedding": lambda: tokens(hub.RotaryEmbedding(name="x")),
    "Mean": lambda: (lambda inp: keras.Model(inp, L.Dense(3)(L.Flatten()(
        Mean(axis=[1], name="x")(L.Embedding(10, 8)(inp))))))(keras.Input((6,), dtype="int32")),
    "ViTPatchingAndEmbedding": lambda: seq(
        ViTPatchingAndEmbedding((8, 8), (4, 4), 8, num_channels=1, name="x"),
        L.GlobalAveragePooling1D(), L.Dense(3)),
    "ViTEncoder": lambda: tokens(ViTEncoder(1, 2, 8, 16, name="x")),
    "ViTEncoderBlock": lambda: tokens(ViTEncoderBlock(2, 8, 16, name="x")),
    "LlamaTransformerDecoder": lambda: tokens(llama_savable()(16, 4, num_key_value_heads=2,
                                                             name="x")),
    "GemmaDecoderBlock": lambda: tokens(GemmaDecoderBlock(8, 16, 4, 2, 1, name="x")),
    # keras.applications' own layers
    "LayerScale": lambda: image(LayerScale(0.5, 1, name="x")),
    "StochasticDepth": lambda: image(StochasticDepth(0.0, name="x")),
    "CustomScaleLayer": lambda: scaled_sum(),
    "InputLayer": lambda: image(L.Activation("relu")),
    # the input pipeline (worker/data/preprocess.c)
    "Rescaling": lambda: image(L.Rescaling(1 / 255, name="x")),
    "Normalization": lambda: image(L.Normalization(mean=0.5, variance=1.0, name="x")),
    "RandomFlip": lambda: image(L.RandomFlip(name="x")),
    "RandomCrop": lambda: image(L.RandomCrop(4, 4, name="x")),
    "RandomTranslation": lambda: image(L.RandomTranslation(0.1, 0.1, name="x")),
}
# Classes that share a name with one of HOSTS' (read by their module): (class, its model).
SAME_NAME = [("RMSNormalization", lambda: tokens(GemmaRMS(name="x")))]  # Gemma's, KerasHub's
ALIASES = {"MaxPool2D": "MaxPooling2D", "AvgPool2D": "AveragePooling2D",
           "GlobalMaxPool2D": "GlobalMaxPooling2D", "GlobalAvgPool2D": "GlobalAveragePooling2D"}


def mwtrain_classes(tmp):
    """The classes mwtrain's layer table reads, from its message for an unknown one."""
    path = os.path.join(tmp, "unknown.json")
    json.dump({"class_name": "Sequential", "config": {"layers": [
        {"class_name": "InputLayer", "config": {"batch_shape": [None, 4]}},
        {"class_name": "NotAKerasClass", "config": {}}]}}, open(path, "w"))
    msg = summary(path)[1]
    m = re.search(r"supported: (.*)$", msg.strip())
    return [c.strip() for c in m.group(1).split(",")] if m else []


def summary(path):
    p = subprocess.run([MWTRAIN, "summary", "--model", path], capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def find_layer(model, name):
    for e in model["config"]["layers"]:
        if e["config"].get("name") == name:
            return e
    raise KeyError(name)


class Cases:
    """The models to run, written to files as they are added; run() runs them all (mwtrain
    summary is mostly start-up: several at once), then checks each."""

    def __init__(self, tmp):
        self.tmp, self.cases = tmp, []

    def add(self, model, check_fn):
        path = os.path.join(self.tmp, f"case{len(self.cases)}.json")
        json.dump(model, open(path, "w"))
        self.cases.append((path, check_fn))

    def add_archive(self, members, config, check_fn):
        """A .keras archive: members with config.json replaced by config."""
        path = os.path.join(self.tmp, f"case{len(self.cases)}.keras")
        with zipfile.ZipFile(path, "w") as z:
            for name, data in members.items():
                z.writestr(name, json.dumps(config) if name == "config.json" else data)
        self.cases.append((path, check_fn))

    def run(self):
        with ThreadPoolExecutor(8) as pool:
            results = list(pool.map(lambda c: summary(c[0]), self.cases))
        for (_, check_fn), (rc, msg) in zip(self.cases, results):
            lines = msg.strip().splitlines()
            last = lines[-1] if lines else ""
            check_fn(rc, re.split(r"\.(?:json|keras): ", last, maxsplit=1)[-1])  # not the path


def default_reads(label):
    return lambda rc, last: check(rc == 0, f"{label}: the default model reads (exit {rc}) {last}")


def value_case(cases, model, cls, key, where, value, label, members=None):
    """where(model copy) -> the dict holding key: key set to value must be read (exit 0), or
    refused with exit 2 naming the layer, the key and the value, never as an unknown key.
    members: the model is an archive's config.json."""
    m = copy.deepcopy(model)
    where(m)[key] = value

    def verdict(rc, last):
        if rc == 0:
            return check(True, f"{label}: {key}={json.dumps(value)} accepted (read)")
        named = key in last and any(r in last for r in renderings(value))
        return check(rc == 2 and UNKNOWN not in last and named and cls in last,
                     f"{label}: {key}={json.dumps(value)}: exit {rc} (want 2 naming the layer, "
                     f"the key and the value, not '{UNKNOWN}'): {last}")
    if members:
        cases.add_archive(members, m, verdict)
    else:
        cases.add(m, verdict)


def control(cases, model, cls, where):
    """A made-up key is refused as unknown: the check above can fail."""
    m = copy.deepcopy(model)
    where(m)["made_up_key"] = 1
    cases.add(m, lambda rc, last: check(
        rc == 2 and UNKNOWN in last and "made_up_key" in last,
        f"{cls}: the control, a made-up key, is refused as unknown (exit {rc}): {last}"))


def layer_cases(cases, cls, model):
    where = (lambda m: m["config"]["layers"][0]["config"]) if cls == "InputLayer" else \
        (lambda m: find_layer(m, "x")["config"])
    cases.add(model, default_reads(cls))
    for key, v in where(model).items():
        if key not in COMMON:
            value_case(cases, model, cls, key, where, other_value(key, v), cls)
    control(cases, model, cls, where)


def initializer_cases(cases):
    """Every initializer and regularizer class mwtrain reads, as Dense's kernel's: each key of
    its config at another value."""
    base = json.loads(seq(L.Dense(3, name="x"), shape=(4,)).to_json())
    inits = [keras.initializers.GlorotUniform(), keras.initializers.GlorotNormal(),
             keras.initializers.HeNormal(), keras.initializers.HeUniform(),
             keras.initializers.LecunNormal(), keras.initializers.LecunUniform(),
             keras.initializers.VarianceScaling(), keras.initializers.RandomUniform(),
             keras.initializers.RandomNormal(), keras.initializers.TruncatedNormal(),
             keras.initializers.Zeros(), keras.initializers.Ones(),
             keras.initializers.Constant()]
    regs = [keras.regularizers.L2(), keras.regularizers.L1(), keras.regularizers.L1L2()]
    for obj, key in [(i, "kernel_initializer") for i in inits] + \
                    [(r, "kernel_regularizer") for r in regs]:
        model = copy.deepcopy(base)
        find_layer(model, "x")["config"][key] = keras.saving.serialize_keras_object(obj)
        label = f"Dense {key} {type(obj).__name__}"
        cases.add(model, default_reads(label))
        where = lambda m, key=key: find_layer(m, "x")["config"][key]["config"]  # noqa: E731
        for k, v in obj.get_config().items():
            value = INIT_VALUES[k] if k in INIT_VALUES else other_value(k, v)
            value_case(cases, model, "Dense", k, where, value, label)
        control(cases, model, label, where)


# compile_config: the values other than Keras' defaults
COMPILE_VALUES = {"optimizer": "sgd", "loss": "categorical_crossentropy", "metrics": ["mae"],
                  "loss_weights": [2.0], "weighted_metrics": ["accuracy"], "run_eagerly": True,
                  "steps_per_execution": 2, "jit_compile": True, "auto_scale_loss": False}


def compile_cases(cases, tmp):
    """A compiled model's .keras archive: each key of compile_config at another value."""
    model = seq(L.Dense(3, name="x"), shape=(4,))
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy",
                  metrics=["accuracy"])
    path = os.path.join(tmp, "compiled.keras")
    model.save(path)
    members = {n: zipfile.ZipFile(path).read(n) for n in zipfile.ZipFile(path).namelist()}
    config = json.loads(members["config.json"])
    cases.add_archive(members, config, default_reads("compile_config"))
    where = lambda m: m["compile_config"]  # noqa: E731
    keys = list(config["compile_config"]) + ["auto_scale_loss"]  # a compile() argument too
    for key in keys:
        value_case(cases, config, "compile_config", key, where, COMPILE_VALUES[key],
                   "compile_config", members)
    m = copy.deepcopy(config)
    m["compile_config"]["made_up_key"] = 1
    cases.add_archive(members, m, lambda rc, last: check(
        rc == 2 and UNKNOWN in last and "made_up_key" in last,
        f"compile_config: the control, a made-up key, is refused as unknown (exit {rc}): {last}"))


def main():
    with tempfile.TemporaryDirectory() as tmp:
        listed = mwtrain_classes(tmp)
        check(len(listed) > 20, f"mwtrain lists the classes it reads: {listed}")
        for c in listed:
            check(c in HOSTS or c in ALIASES, f"{c}: this test builds a model around it")
        cases = Cases(tmp)
        for c, make in HOSTS.items():
            layer_cases(cases, c, json.loads(make().to_json()))
        for c, make in SAME_NAME:
            layer_cases(cases, c, json.loads(make().to_json()))
        initializer_cases(cases)
        compile_cases(cases, tmp)
        print(f"{len(cases.cases)} models", flush=True)
        cases.run()
    finish()


if __name__ == "__main__":  # keras_twins.py imports the builders
    main()
