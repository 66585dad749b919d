"""Keras' float32 SGD step on its TensorFlow backend, one more float32 draw for zoo.py's floor
(run with the TensorFlow venv's python, tests/bench/tf_venv.sh):

    tf_step.py ARCHIVE DATA.npz LR OUT.npz

OUT.npz: every variable after one SGD step of the mean sparse cross-entropy over x_train (the
whole array one batch), in model.weights order, arr_0, arr_1, ..."""
import os
import sys

os.environ["KERAS_BACKEND"] = "tensorflow"
import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402


def main():
    arch, data, lr, out = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
    model = keras.models.load_model(arch)
    for lay in model._flatten_layers():
        if isinstance(lay, (keras.layers.Dropout, keras.layers.SpatialDropout2D)):
            lay.rate = 0.0
    d = np.load(data)
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(keras.losses.sparse_categorical_crossentropy(
            d["y_train"], model(d["x_train"], training=True)))
    grads = tape.gradient(loss, model.trainable_variables)
    for v, g in zip(model.trainable_variables, grads):
        v.assign(v - tf.cast(lr, v.dtype) * g)
    np.savez(out, *[np.asarray(w.numpy(), np.float64) for w in model.weights])


main()
