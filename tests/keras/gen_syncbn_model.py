"""Writes tests/data/keras/graph/syncbn_k3.json: a small Functional CNN whose three
BatchNormalization layers have synchronized=True (Keras 3), for the layout-independence test
(tests/mpi/test_layout.sh). Two of them normalize 14x14 and 7x7 feature maps; the third a flat
(batch, 32) tensor, where a replica's own 16 rows give statistics far from the global batch's,
so training with and without synchronization differs clearly. No layer before a BN has a bias
(its gradient would be exactly zero, and Adam turns rounding noise there into steps).

Keras 3 builds BatchNormalization(synchronized=True) only on its TensorFlow backend (the flag
imports TensorFlow's distribution code); this venv runs JAX. So the model is built with
synchronized=False and the flag is set in the saved config, the one field where the two differ.

    KERAS_BACKEND=jax build/keras-venv/bin/python tests/keras/gen_syncbn_model.py [OUT]
"""
import json
import sys

import keras
from keras import layers


def build(sync=False):
    x = inp = keras.Input((28, 28, 1), name="image")
    x = layers.Conv2D(8, 3, strides=2, padding="same", use_bias=False, name="conv_a")(x)
    x = layers.BatchNormalization(synchronized=sync, name="bn_a")(x)
    x = layers.Activation("relu", name="relu_a")(x)
    x = layers.Conv2D(16, 3, strides=2, padding="same", use_bias=False, name="conv_b")(x)
    x = layers.BatchNormalization(synchronized=sync, name="bn_b")(x)
    x = layers.Activation("relu", name="relu_b")(x)
    x = layers.GlobalAveragePooling2D(name="gap")(x)
    x = layers.Dense(32, use_bias=False, name="fc")(x)
    x = layers.BatchNormalization(synchronized=sync, name="bn_fc")(x)
    x = layers.Activation("relu", name="relu_fc")(x)
    out = layers.Dense(10, name="logits")(x)
    return keras.Model(inp, out, name="syncbn")


if __name__ == "__main__":
    out = sys.argv[1] if len(sys.argv) > 1 else "tests/data/keras/graph/syncbn_k3.json"
    cfg = json.loads(build().to_json())
    bns = [l for l in cfg["config"]["layers"] if l["class_name"] == "BatchNormalization"]
    assert len(bns) == 3 and all(l["config"]["synchronized"] is False for l in bns)
    for l in bns:
        l["config"]["synchronized"] = True
    with open(out, "w") as f:
        json.dump(cfg, f, indent=1, sort_keys=True)
        f.write("\n")
    print("wrote", out)
