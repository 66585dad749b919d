"""Write tests/data/keras_archive/<case>/input.keras: a good .keras made by Keras and broken
copies of it, one defect each; test_keras_archive.c checks mwtrain's message for each against
the case's `expected` (its first line the status, then the message, written by hand).

    tests/keras/run.sh gen_bad_archives.py          (needs the venv; the outputs are committed)

The model: Input (6, 6, 1), Conv2D(2, 3), Flatten, Dense(3): weights layers/conv2d/vars/{0,1}
(3, 3, 1, 2), (2,) and layers/dense/vars/{0,1} (32, 3), (3,).
"""
import io
import json
import os
import warnings
import zipfile

import h5py
import keras
import numpy as np

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "keras_archive")
keras.utils.set_random_seed(1)
model = keras.Sequential([keras.Input((6, 6, 1)), keras.layers.Conv2D(2, 3, name="conv"),
                          keras.layers.Flatten(), keras.layers.Dense(3, name="logits")])
buf = io.BytesIO()
tmp = os.path.join(out, "good.keras")
os.makedirs(out, exist_ok=True)
model.save(tmp)
with open(tmp, "rb") as f:
    good = f.read()
os.remove(tmp)
members = {n: zipfile.ZipFile(io.BytesIO(good)).read(n)
           for n in ("metadata.json", "config.json", "model.weights.h5")}


def archive(m):
    b = io.BytesIO()
    with zipfile.ZipFile(b, "w") as z:
        for name, data in m.items():
            z.writestr(name, data)
    return b.getvalue()


def edit_h5(fn):
    """model.weights.h5 changed by fn(h5py.File)."""
    b = io.BytesIO(members["model.weights.h5"])
    with h5py.File(b, "r+") as f:
        fn(f)
    return b.getvalue()


def with_member(name, data):
    m = dict(members)
    if data is None:
        del m[name]
    else:
        m[name] = data
    return archive(m)


def replace(path, value):
    def fn(f):
        del f[path]
        f[path] = value
    return fn


def drop(path):
    def fn(f):
        del f[path]
    return fn


def extra(f):
    f.create_group("layers/dense_1/vars")["0"] = np.zeros((3, 3), np.float32)


def duplicated(name):
    """The archive with member `name` twice (zipfile writes it, warning)."""
    b = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with zipfile.ZipFile(b, "w") as z:
            for n, data in members.items():
                z.writestr(n, data)
            z.writestr(name, members[name])
    return b.getvalue()


cfg = json.loads(members["config.json"])
cfg["config"]["layers"][1]["config"]["filters"] = 4
more_filters = json.dumps(cfg).encode()
cfg["config"]["layers"][1]["class_name"] = "Conv3D"
unknown_layer = json.dumps(cfg).encode()
flipped = bytearray(good)
h5_at = good.index(b"\x89HDF")
flipped[h5_at + 200] ^= 0xFF

cases = {
    "good": good,
    "not_zip": b"this is not a zip archive\n" * 8,
    "truncated_zip": good[: len(good) // 2],
    "no_config": with_member("config.json", None),
    "no_weights": with_member("model.weights.h5", None),
    "bad_metadata": with_member("metadata.json", b"{\"keras_version\": "),
    "crc_mismatch": bytes(flipped),
    "corrupt_h5": with_member("model.weights.h5", bytes(range(256)) * 16),
    "truncated_h5": with_member("model.weights.h5", members["model.weights.h5"][:1200]),
    "missing_layer": with_member("model.weights.h5", edit_h5(drop("layers/dense"))),
    "missing_variable": with_member("model.weights.h5", edit_h5(drop("layers/dense/vars/1"))),
    "extra_layer": with_member("model.weights.h5", edit_h5(extra)),
    "wrong_shape": with_member("model.weights.h5", edit_h5(
        replace("layers/dense/vars/0", np.zeros((32, 4), np.float32)))),
    "wrong_dtype": with_member("model.weights.h5", edit_h5(
        replace("layers/conv2d/vars/0", np.zeros((3, 3, 1, 2), np.float64)))),
    "int_weights": with_member("model.weights.h5", edit_h5(
        replace("layers/dense/vars/1", np.zeros((3,), np.int32)))),
    "config_weights_mismatch": with_member("config.json", more_filters),
    "unknown_layer": with_member("config.json", unknown_layer),
    "duplicate_member": duplicated("config.json"),
}
for name, data in cases.items():
    os.makedirs(os.path.join(out, name), exist_ok=True)
    with open(os.path.join(out, name, "input.keras"), "wb") as f:
        f.write(data)
print(f"wrote {len(cases)} cases under {os.path.normpath(out)}")
