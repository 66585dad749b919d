"""--model m.keras starts from exactly Keras' weights.

For the tutorial CNN and an MLP (softmax output, Dropout, a bias-free Dense, a ReLU layer),
Keras builds the model with its own initial weights and saves a .keras archive; then
  1. `mwtrain summary --model m.keras` counts Keras' parameters;
  2. `mwtrain train --model m.keras --epochs 0 --dump-weights` holds exactly (bitwise) Keras'
     weights in Keras' order;
  3. one training step at a learning rate of 1e-30 (the weights do not move in float32) and
     the epoch's evaluation of all 10,000 test images: mwtrain's test loss (metrics.csv) equals
     Keras' model.evaluate within 1e-4 relative, the accuracy within 0.01 %.
"""
import os

import keras
import numpy as np

import oracle as o

x, y = o.test_set()
for name, build in [("tutorial_cnn", o.tutorial_cnn), ("mlp", o.mlp)]:
    keras.utils.set_random_seed(7)
    model = o.compile_like_mwtrain(build())
    d = o.workdir()
    path = os.path.join(d, f"{name}.keras")
    model.save(path)

    out = o.mwtrain("summary", "--model", path)
    total = next(int(line.split()[-1].replace(",", "")) for line in out.splitlines()
                 if line.startswith("Total params"))
    o.check(total == model.count_params(),
            f"{name}: summary counts {total} parameters, Keras {model.count_params()}")

    dump = os.path.join(d, "w.bin")
    o.mwtrain("train", "--model", path, "--epochs", "0", "--dump-weights", dump,
              "--summary-dir", "", "--checkpoint-dir", os.path.join(d, "ck"), "--progress",
              "none", cwd=d)
    got, ref = np.fromfile(dump, "<f4"), o.flat_weights(model)
    same = got.size == ref.size and np.array_equal(got, ref)
    bad = "" if same or got.size != ref.size else f", first difference at {np.argmax(got != ref)}"
    o.check(same, f"{name}: the {got.size} loaded weights are Keras' {ref.size}, bitwise{bad}")

    logs = os.path.join(d, "logs")
    o.mwtrain("train", "--model", path, "--epochs", "1", "--steps-per-epoch", "1",
              "--learning-rate", "1e-30", "--summary-dir", logs, "--checkpoint-every-epochs",
              "0", "--checkpoint-dir", os.path.join(d, "ck"), "--progress", "none", cwd=d)
    head, rows = o.read_csv(os.path.join(logs, "metrics.csv"))
    mw_loss, mw_acc = rows[-1][head.index("test/loss")], rows[-1][head.index("test/accuracy")]
    k_loss, k_acc = model.evaluate(x, y, batch_size=500, verbose=0)
    rel = abs(mw_loss - k_loss) / abs(k_loss)
    o.check(rel <= 1e-4, f"{name}: test loss mwtrain {mw_loss:.9g}, Keras {k_loss:.9g} "
            f"(relative {rel:.2e} <= 1e-4)")
    o.check(abs(mw_acc - k_acc) <= 1e-4 + 1e-9,
            f"{name}: test accuracy mwtrain {100 * mw_acc:.2f} %, Keras {100 * k_acc:.2f} %")
o.finish()
