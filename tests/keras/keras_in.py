"""--model m.keras starts from exactly Keras' weights.

For the tutorial CNN and an MLP (softmax output, Dropout, a bias-free Dense, a ReLU layer),
Keras builds the model with its own initial weights and saves a .keras archive; then
  1. `mwtrain summary --model m.keras` counts Keras' parameters;
  2. `mwtrain train --model m.keras --epochs 0 --dump-weights` holds exactly (bitwise) Keras'
     weights in Keras' order;
     two ranks under mpirun read it alike; a copy with a float64 kernel stops the run with
     exit 3 and one message naming the archive, the member, the layer and the variable;
  3. one training step at a learning rate of 1e-30 (the weights do not move in float32) and
     the epoch's evaluation of all 10,000 test images: mwtrain's test loss (metrics.csv) equals
     Keras' model.evaluate within 1e-4 relative, the accuracy within 0.01 %.
"""
import io
import os
import subprocess
import zipfile

import h5py
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

    if name == "tutorial_cnn":  # every rank reads the archive itself
        dump2 = os.path.join(d, "w2.bin")
        p = subprocess.run(["mpirun", "-n", "2", "--oversubscribe", o.MWTRAIN, "train",
                            "--model", path, "--epochs", "0", "--dump-weights", dump2,
                            "--summary-dir", "", "--checkpoint-dir", os.path.join(d, "ck"),
                            "--progress", "none"], cwd=d, capture_output=True, text=True)
        o.check(p.returncode == 0 and np.array_equal(np.fromfile(dump2, "<f4"), ref),
                f"{name}: 2 ranks start from Keras' weights too (exit {p.returncode}) "
                f"{p.stderr[-300:] if p.returncode else ''}")
        # a damaged archive: float64 weights -> exit 3 before training, naming them
        bad = os.path.join(d, "bad.keras")
        with zipfile.ZipFile(path) as zin, zipfile.ZipFile(bad, "w") as zout:
            for item in zin.namelist():
                data = zin.read(item)
                if item == "model.weights.h5":
                    b = io.BytesIO(data)
                    with h5py.File(b, "r+") as f:
                        k = f["layers/dense_1/vars/0"][...]
                        del f["layers/dense_1/vars/0"]
                        f["layers/dense_1/vars/0"] = k.astype(np.float64)
                    data = b.getvalue()
                zout.writestr(item, data)
        out = o.mwtrain("train", "--model", bad, "--epochs", "1", "--summary-dir", "",
                        "--checkpoint-dir", os.path.join(d, "ck"), cwd=d, expect=3)
        want = (f"{bad}: model.weights.h5: layer 'dense_1': layers/dense_1/vars/0 (kernel) is "
                "float64, expected float32")
        o.check(want in out and "Epoch" not in out and "HDF5-DIAG" not in out,
                f"{name}: a float64 kernel stops the run with exit 3 and one message: {want}")

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
