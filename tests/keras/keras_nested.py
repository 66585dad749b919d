"""Models used as layers, and keras.applications' own layers, in and out of .keras archives.

One Functional model holds a Sequential used as a layer (ConvNeXt's stem: Conv2D and
LayerNormalization), a Functional used as a layer (a residual block with a Dense on the image,
ConvNeXt's LayerScale and StochasticDepth), a squeeze-and-excitation gate ((None, 1, 1, C)
times the image), Inception-ResNet's CustomScaleLayer and a second nested Sequential. Keras keeps each nested
model's weights in its own group (layers/sequential/layers/conv2d/vars, layers/functional/...).
  1. `mwtrain summary --model m.keras` counts Keras' parameters;
  2. `train --epochs 0 --dump-weights`: exactly (bitwise) Keras' weights in Keras' order, so
     every nested variable was found where Keras put it;
  3. a short training run, then `export --format keras`: keras.models.load_model() opens it
     without skipping a variable, its weights are bitwise the trained ones, the nested models
     are Keras models again (not flattened), and Keras' test loss equals mwtrain's within 1e-4
     relative;
  4. `export --format weights-h5` loads with model.load_weights into Keras' own build of the
     architecture and predicts as the loaded .keras;
  5. StochasticDepth(0.3) (ConvNeXt's drop_path_rate above 0): Keras keeps each example's
     branch with probability 0.7, divided by 0.7, as Dropout(0.3, noise_shape=(None, 1, 1, 1))
     does; mwtrain's 8 steps with it equal its 8 steps with that Dropout bitwise (the same
     per-example draws), and differ from plain Dropout(0.3) (a draw per value: the control) and
     from StochasticDepth(0); its export loads in Keras, whose test loss (no dropping outside
     training) equals mwtrain's within 1e-4 relative. The same bitwise equality (and its
     control) holds in a plain Sequential model, the other form the reader takes it in.
"""
import os
import warnings

import keras
import numpy as np
from keras import layers
from keras.src.applications.convnext import LayerScale, StochasticDepth
from keras.src.applications.inception_resnet_v2 import CustomScaleLayer

import oracle as o


def nested(drop=None):
    """drop: the block's branch after LayerScale (default StochasticDepth(0.0))."""
    inp = keras.Input((28, 28, 1))
    stem = keras.Sequential([
        keras.Input((28, 28, 1)),
        layers.Conv2D(8, 4, strides=4),
        layers.LayerNormalization(epsilon=1e-6),
    ], name="stem")
    x = stem(inp)
    bi = keras.Input((7, 7, 8))
    b = layers.Conv2D(8, 3, padding="same", activation="relu")(bi)
    b = layers.Dense(8)(b)
    b = (drop or StochasticDepth(0.0))(LayerScale(0.5, 8)(b))
    x = keras.Model(bi, layers.Add()([bi, b]), name="block")(x)
    s = layers.GlobalAveragePooling2D(keepdims=True)(x)
    s = layers.Conv2D(8, 1, activation="sigmoid")(s)
    x = layers.Multiply()([x, s])
    x = CustomScaleLayer(0.17)([x, layers.Conv2D(8, 3, padding="same")(x)])
    x = keras.Sequential([layers.LayerNormalization(), layers.Conv2D(12, 2, strides=2)],
                         name="down")(x)
    out = layers.Dense(10)(layers.Flatten()(x))
    return keras.Model(inp, out, name="nested")


x, y = o.test_set()
keras.utils.set_random_seed(5)
model = o.compile_like_mwtrain(nested())
d = o.workdir()
src = os.path.join(d, "src.keras")
model.save(src)

out = o.mwtrain("summary", "--model", src)
total = next(int(line.split()[-1].replace(",", "")) for line in out.splitlines()
             if line.startswith("Total params"))
o.check(total == model.count_params(),
        f"summary counts {total} parameters, Keras {model.count_params()}")

w0 = os.path.join(d, "w0.bin")
o.mwtrain("train", "--model", src, "--epochs", "0", "--dump-weights", w0, "--progress", "none",
          cwd=d)
got, ref = np.fromfile(w0, "<f4"), o.flat_weights(model)
o.check(got.size == ref.size and np.array_equal(got, ref),
        f"--model reads every nested variable bitwise ({ref.size} values)")

ck, logs, dump = (os.path.join(d, n) for n in ("ck", "logs", "w.bin"))
o.mwtrain("train", "--model", src, "--epochs", "1", "--steps-per-epoch", "40",
          "--checkpoint-dir", ck, "--summary-dir", logs, "--dump-weights", dump,
          "--progress", "none", cwd=d)
head, rows = o.read_csv(os.path.join(logs, "metrics.csv"))
mw_loss = rows[-1][head.index("test/loss")]
kpath, hpath = os.path.join(d, "out.keras"), os.path.join(d, "out.weights.h5")
o.mwtrain("export", "--checkpoint-dir", ck, "--format", "keras", "--output", kpath, cwd=d)
o.mwtrain("export", "--checkpoint-dir", ck, "--format", "weights-h5", "--output", hpath, cwd=d)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    k = keras.models.load_model(kpath)
skipped = [str(w.message) for w in caught if "Skipping" in str(w.message)]
o.check(not skipped, f"load_model loads every variable, the optimizer's too {skipped[:1]}")
got, ref = o.flat_weights(k), np.fromfile(dump, "<f4")
o.check(got.size == ref.size and np.array_equal(got, ref),
        f"the .keras holds the trained weights bitwise ({got.size} values)")
o.check(not np.array_equal(ref, o.flat_weights(model)), "training moved the weights")
kinds = [type(k.get_layer(n)).__name__ for n in ("stem", "block", "down")]
o.check(kinds == ["Sequential", "Functional", "Sequential"],
        f"the nested models come back as Keras models: {kinds}")
k_loss = k.evaluate(x, y, batch_size=500, verbose=0)[0]
rel = abs(mw_loss - k_loss) / abs(k_loss)
o.check(rel <= 1e-4, f"test loss Keras {k_loss:.9g}, mwtrain {mw_loss:.9g} (relative {rel:.2e})")

same = keras.models.model_from_json(model.to_json())
same.load_weights(hpath)
p_h5, p_keras = same.predict(x[:512], verbose=0), k.predict(x[:512], verbose=0)
o.check(np.array_equal(p_h5, p_keras),
        f"load_weights(.weights.h5) predicts as the .keras "
        f"(max difference {np.abs(p_h5 - p_keras).max():.3g})")


def trained(tag, drop):
    """nested(drop) from the same initial weights as model, 8 steps: the weights, test loss."""
    m = o.compile_like_mwtrain(nested(drop))
    m.set_weights(model.get_weights())
    path = os.path.join(d, tag + ".keras")
    m.save(path)
    w, ck, lg = (os.path.join(d, tag + n) for n in ("-w.bin", "-ck", "-logs"))
    o.mwtrain("train", "--model", path, "--epochs", "1", "--steps-per-epoch", "8", "--seed", "3",
              "--checkpoint-dir", ck, "--summary-dir", lg, "--dump-weights", w,
              "--progress", "none", cwd=d)
    head, rows = o.read_csv(os.path.join(lg, "metrics.csv"))
    return np.fromfile(w, "<f4"), rows[-1][head.index("test/loss")], ck


sd, sd_loss, sd_ck = trained("sd", StochasticDepth(0.3))
twin, _, _ = trained("sd-twin", layers.Dropout(0.3, noise_shape=(None, 1, 1, 1)))
o.check(np.array_equal(sd, twin), "StochasticDepth(0.3) trains as Dropout(0.3, noise_shape="
        "(None, 1, 1, 1)) bitwise")
for tag, drop in [("sd-plain", layers.Dropout(0.3)), ("sd-zero", StochasticDepth(0.0))]:
    other, _, _ = trained(tag, drop)
    o.check(not np.array_equal(sd, other), f"control: {tag} trains otherwise "
            f"(max difference {np.abs(sd - other).max():.3g})")


def sequential_trained(tag, drop):
    """A Sequential model with drop after its convolution (no nesting), 8 steps: the weights."""
    keras.utils.set_random_seed(6)
    m = o.compile_like_mwtrain(keras.Sequential([
        keras.Input((28, 28, 1)), layers.Conv2D(8, 4, strides=4, activation="relu"), drop,
        layers.Flatten(), layers.Dense(10)], name="seq_" + tag.replace("-", "_")))
    path, w = os.path.join(d, tag + ".keras"), os.path.join(d, tag + "-w.bin")
    m.save(path)
    o.mwtrain("train", "--model", path, "--epochs", "1", "--steps-per-epoch", "8", "--seed", "3",
              "--dump-weights", w, "--summary-dir", "", "--checkpoint-dir",
              os.path.join(d, tag + "-ck"), "--progress", "none", cwd=d)
    return np.fromfile(w, "<f4")


# the same layer read from a Sequential model (a layer's acceptance never depends on the form)
seq = sequential_trained("seq-sd", StochasticDepth(0.3))
o.check(np.array_equal(seq, sequential_trained("seq-twin", layers.Dropout(
    0.3, noise_shape=(None, 1, 1, 1)))), "in a Sequential model StochasticDepth(0.3) trains as "
    "Dropout(0.3, noise_shape=(None, 1, 1, 1)) bitwise")
other = sequential_trained("seq-plain", layers.Dropout(0.3))
o.check(not np.array_equal(seq, other), "control: the Sequential model with Dropout(0.3) trains "
        f"otherwise (max difference {np.abs(seq - other).max():.3g})")
sd_out = os.path.join(d, "sd-out.keras")
o.mwtrain("export", "--checkpoint-dir", sd_ck, "--format", "keras", "--output", sd_out, cwd=d)
k_sd = keras.models.load_model(sd_out)
k_loss = k_sd.evaluate(x, y, batch_size=500, verbose=0)[0]
rel = abs(sd_loss - k_loss) / abs(k_loss)
o.check(np.array_equal(o.flat_weights(k_sd), sd) and rel <= 1e-4,
        f"StochasticDepth(0.3)'s export: Keras' test loss {k_loss:.9g}, mwtrain's {sd_loss:.9g} "
        f"(relative {rel:.2e})")
o.finish()
