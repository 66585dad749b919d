"""A layer's acceptance never depends on whether the model is Sequential or Functional.

For every single-input class keras_keys.py builds a model around (the layer table's classes,
the preprocessing layers', KerasHub's, keras.applications' own), the same chain of layers is
written by Keras twice: as the keras.Sequential keras_keys.py builds, and as a Functional model
(keras.Model) of the same layers rebuilt from their configs, so every layer keeps its name and
config. `mwtrain summary --model FILE` reads both forms of
  - the default model, as a .keras archive: its summary, and its weights as `mwtrain train
    --epochs 0 --dump-weights` reads them (each form's Keras weights, bitwise), and
  - each key of the layer's config at a value other than its default (keras_keys.py's values),
    as model JSON, the key changed the same way in both forms (Keras writes both forms itself
    where it can build the value: a Functional graph holds more, mask_zero's mask ops), and
    the layer's dtype policy at mixed_float16;
both must be read to the same layers (the summary's table: names, output shapes, parameters)
and weights, or both refused with the same exit status and the same message (the file's name aside). Which
one it is, keras-keys checks; this test checks that the model's kind plays no part in it.

Exempt, with the reason (they cannot be a Sequential model's layer): EXEMPT below.

The controls: a Functional twin given a key value mwtrain refuses (Dense's activation
"not_an_activation"), and one given a value it reads (units 4), each beside its Sequential twin
unchanged, must be flagged as disagreements: agree() can fail on the exit status and on the
layers read.

    tests/keras/run.sh keras_twins.py
"""
import copy
import json
import os
import re
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from oracle import MWTRAIN, check, finish, flat_weights, keras
import keras_keys as kk

hub = kk.hub
# The classes whose Keras call takes several tensors: no Sequential model can hold them.
EXEMPT = {
    "Add": "a merge of several inputs",
    "Multiply": "a merge of several inputs",
    "Concatenate": "a merge of several inputs",
    "CustomScaleLayer": "a merge of a list of two inputs",
    "MultiHeadAttention": "query and value are two call arguments",
    "Mean": "an operation (ops.mean), not a layer: a Sequential model holds layers only",
}
# Single-input classes keras_keys.py builds as a Functional model (added to their input there):
# a Sequential chain of them here.
SEQ_HOSTS = {
    "PositionEmbedding": lambda: kk.tokens(hub.PositionEmbedding(6, name="x")),
    "SinePositionEncoding": lambda: kk.tokens(hub.SinePositionEncoding(name="x")),
}

# A dtype policy other than float32 (every layer has the key; keras_keys.py leaves it out).
MIXED = {"module": "keras", "class_name": "DTypePolicy", "config": {"name": "mixed_float16"},
         "registered_name": None}


# Keys KerasHub 0.32 writes in these classes' configs that their own constructors refuse (so
# from_config fails; mwtrain's export leaves them out too): a twin is rebuilt without them.
UNLOADABLE = {"ViTPatchingAndEmbedding": ("num_patches", "num_positions"),
              "ViTEncoderBlock": ("key_dim",)}


def functional_twin(model):
    """The Sequential model's layers, rebuilt from their configs, as a Functional model of the
    same name and input."""
    first = json.loads(model.to_json())["config"]["layers"][0]["config"]
    inp = keras.layers.InputLayer.from_config(first).output  # sparse, optional... kept
    x = inp
    for layer in model.layers:
        cfg = layer.get_config()
        for key in UNLOADABLE.get(type(layer).__name__, ()):
            cfg.pop(key)
        x = type(layer).from_config(cfg)(x)
    return keras.Model(inp, x, name=model.name)


def layer_config(model, cls):
    """The config of the layer under test in a model's JSON (InputLayer: the first layer)."""
    if cls == "InputLayer":
        return model["config"]["layers"][0]["config"]
    return kk.find_layer(model, "x")["config"]


def table(out):
    """The layers of a summary as (name (class), output shape, parameters), and its totals: the
    Functional form's InputLayer row and "Connected to" column left out."""
    rows = []
    for line in out.splitlines():
        row = re.match(r"(\S.*\)) +(\(None[^)]*\)) +(\d+)", line)  # a long name: one space
        if row and not row[1].endswith("(InputLayer)"):
            rows.append(row.groups())
        elif line.startswith(("Total params", "Trainable params", "Non-trainable params")):
            rows.append(line.strip())
    return rows


def summary(path, _data):
    """mwtrain summary of path: (exit status, last line, the table)."""
    rc, msg = kk.summary(path)
    lines = msg.strip().splitlines()
    return rc, (lines[-1] if lines else "").replace(path, "FILE"), table(msg)


def weights(path, data):
    """mwtrain train --epochs 0 of the archive path on data: (exit status, last line, what it
    read: Keras' weights (path.ref) bitwise, or None)."""
    run = path + ".run"
    os.makedirs(run)
    p = subprocess.run([MWTRAIN, "train", "--model", path, "--data", data, "--epochs", "0",
                        "--dump-weights", "w.bin", "--progress", "none"], cwd=run,
                       capture_output=True, text=True)
    lines = (p.stdout + p.stderr).strip().splitlines()
    last = (lines[-1] if lines else "").replace(path, "FILE")
    if p.returncode:
        return p.returncode, last, None
    got, ref = np.fromfile(os.path.join(run, "w.bin"), "<f4"), np.fromfile(path + ".ref", "<f4")
    same = got.size == ref.size and np.array_equal(got, ref)
    return 0, last, f"Keras' {ref.size} weights, bitwise" if same else None


def data_file(tmp, model, made={}):
    """A Keras-style .npz for model's input and classes (one per kind of input)."""
    shape, dtype = tuple(model.inputs[0].shape[1:]), str(model.inputs[0].dtype)
    key = (shape, dtype, model.output_shape[-1])
    if key not in made:
        r = np.random.default_rng(0)

        def x(n):
            if "int" in dtype:  # token ids below every vocabulary here (10)
                return r.integers(0, 10, (n, *shape)).astype(np.int32)
            return r.uniform(0, 1, (n, *shape)).astype(np.float32)
        made[key] = os.path.join(tmp, f"data{len(made)}.npz")
        np.savez(made[key], x_train=x(32), y_train=r.integers(0, key[2], 32), x_test=x(8),
                 y_test=r.integers(0, key[2], 8))
    return made[key]


def agree(seq, fn):
    """Both forms' (exit status, last line, what was read) say the same: both read the same
    layers (the summary's table) or weights, or both are refused with the same message."""
    return seq[0] == fn[0] and (seq[1] == fn[1] if seq[0] else bool(seq[2]) and seq[2] == fn[2])


class Pairs:
    """Sequential/Functional twins written to files as they are added; run() reads them all
    (several mwtrain processes at once: summary, or weights for an archive's), then compares
    each pair."""

    def __init__(self, tmp):
        self.tmp, self.pairs = tmp, []

    def path(self, form, ext):
        return os.path.join(self.tmp, f"case{len(self.pairs)}_{form}.{ext}")

    def add_json(self, label, seq, fn, want_agree=True):
        paths = (self.path("seq", "json"), self.path("fn", "json"))
        for p, m in zip(paths, (seq, fn)):
            json.dump(m, open(p, "w"))
        self.pairs.append((label, paths, want_agree, summary, None))

    def add_archives(self, label, seq, fn):
        paths = (self.path("seq", "keras"), self.path("fn", "keras"))
        for p, m in zip(paths, (seq, fn)):
            m.save(p)
            (flat_weights(m) if m.weights else np.zeros(0, np.float32)).tofile(p + ".ref")
        self.pairs.append((label, paths, True, summary, None))
        self.pairs.append((f"{label} weights (train --epochs 0)", paths, True, weights,
                           data_file(self.tmp, seq)))

    def run(self):
        jobs = [(p, read, data) for _, paths, _, read, data in self.pairs for p in paths]
        with ThreadPoolExecutor(8) as pool:
            got = list(pool.map(lambda j: j[1](j[0], j[2]), jobs))
        for i, (label, _, want, _, _) in enumerate(self.pairs):
            seq, fn = got[2 * i], got[2 * i + 1]
            ok = agree(seq, fn) == want
            if want and ok:
                read = f"read{': ' + seq[2] if isinstance(seq[2], str) else ''}"
                check(True, f"{label}: both " + (read if seq[0] == 0 else
                                                 f"refused (exit {seq[0]}): {seq[1]}"))
            elif want:
                check(False, f"{label}: Sequential exit {seq[0]}, Functional exit {fn[0]}\n"
                      f"      Sequential: {seq[1]} {seq[2]}\n      Functional: {fn[1]} {fn[2]}")
            else:  # the controls
                check(ok and seq[0] == 0, f"{label}: flagged (Sequential exit {seq[0]}, "
                      f"Functional exit {fn[0]}: {fn[1] if fn[0] else fn[2]})")


def class_pairs(pairs, cls, model):
    """The default model of class cls (a .keras archive each) and each of its keys at another
    value (JSON), in both forms."""
    twin = functional_twin(model)
    seq, fn = json.loads(model.to_json()), json.loads(twin.to_json())
    check(seq["class_name"] == "Sequential" and fn["class_name"] == "Functional" and
          layer_config(seq, cls) == layer_config(fn, cls),
          f"{cls}: the twins hold the same layer config")
    pairs.add_archives(f"{cls} default (.keras)", model, twin)
    built = 0
    variants = [(k, kk.other_value(k, v)) for k, v in layer_config(seq, cls).items()
                if k not in kk.COMMON]
    for key, value in variants + [("dtype", MIXED)]:
        s = copy.deepcopy(seq)
        layer_config(s, cls)[key] = value
        try:  # Keras writes both forms itself (a Functional graph differs: mask_zero's masks)
            m = keras.models.model_from_json(json.dumps(s))
            s, f = json.loads(m.to_json()), json.loads(functional_twin(m).to_json())
            built += 1
        except Exception:  # a value Keras cannot build: the same key edited in both forms
            f = copy.deepcopy(fn)
            layer_config(f, cls)[key] = copy.deepcopy(value)
        check(layer_config(s, cls) == layer_config(f, cls),
              f"{cls} {key}: the twins hold the same layer config")
        pairs.add_json(f"{cls} {key}={json.dumps(value)}", s, f)
    return built


def control(pairs):
    """Twins that differ must be flagged: a key refused in one form only, and a key read in
    one form only (both read, to different layers)."""
    model = kk.HOSTS["Dense"]()
    seq = json.loads(model.to_json())
    for key, value, what in (("activation", "not_an_activation", "refused"),
                             ("units", 4, "read differently")):
        fn = json.loads(functional_twin(model).to_json())
        layer_config(fn, "Dense")[key] = value
        pairs.add_json(f"control: Dense {key} {what} in the Functional form only", seq, fn,
                       want_agree=False)


def main():
    for cls, why in EXEMPT.items():
        check(cls in kk.HOSTS and not isinstance(kk.HOSTS[cls](), keras.Sequential),
              f"{cls}: exempt ({why}), keras_keys.py builds it as a Functional model")
    with tempfile.TemporaryDirectory() as tmp:
        pairs, built = Pairs(tmp), 0
        for cls in sorted(set(kk.HOSTS) - set(EXEMPT)):  # every other class keras-keys builds
            model = SEQ_HOSTS.get(cls, kk.HOSTS[cls])()
            if check(isinstance(model, keras.Sequential), f"{cls}: built as a Sequential model"):
                built += class_pairs(pairs, cls, model)
        control(pairs)
        print(f"{len(pairs.pairs)} pairs of models ({built} keys at another value built by "
              f"Keras in both forms, the others edited)", flush=True)
        pairs.run()
    finish()


if __name__ == "__main__":
    main()
