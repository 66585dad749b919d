"""A .keras archive's optimizer trains: --model m.keras takes compile_config's optimizer
(RMSprop with a schedule here) unless a flag names another; the rate of every step equals the
one Keras' own schedule gives for that step; the export names the optimizer's Keras class;
an optimizer mwtrain lacks is refused naming the archive and the key."""
import csv
import glob
import json
import os
import tempfile
import zipfile

from oracle import check, finish, keras, mwtrain

with tempfile.TemporaryDirectory() as tmp:
    sched = keras.optimizers.schedules.ExponentialDecay(0.002, decay_steps=2, decay_rate=0.5)
    model = keras.Sequential([keras.Input((28, 28, 1)), keras.layers.Flatten(),
                              keras.layers.Dense(10)])
    model.compile(optimizer=keras.optimizers.RMSprop(learning_rate=sched, rho=0.8),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    path = os.path.join(tmp, "rms.keras")
    model.save(path)

    def train(tag, *flags):
        out = os.path.join(tmp, tag)
        mwtrain("train", "--model", path, "--epochs", "2", "--steps-per-epoch", "3",
                "--test-examples", "100", "--checkpoint-dir", out + "/ck", "--summary-dir",
                out + "/logs", "--progress", "none", *flags)
        rows = list(csv.DictReader(open(glob.glob(out + "/logs/**/metrics.csv",
                                                   recursive=True)[0])))
        return out, [(int(r["step"]), float(r["learning_rate"])) for r in rows]

    out, rates = train("archive")
    for step, lr in rates:  # metrics.csv: the rate of the next step
        want = float(sched(step))
        check(abs(lr - want) <= 1e-6 * want,
              f"step {step}: learning rate {lr:.9g} = Keras' schedule {want:.9g}")
    exported = os.path.join(tmp, "out.keras")
    mwtrain("export", "--checkpoint-dir", out + "/ck", "--format", "keras", "--output", exported)
    cfg = json.loads(zipfile.ZipFile(exported).read("config.json"))
    cls = cfg["compile_config"]["optimizer"]["class_name"]
    check(cls == "RMSprop", f"the export's compile_config names RMSprop (got {cls})")
    check(keras.models.load_model(exported).optimizer.__class__.__name__ == "RMSprop",
          "Keras loads the export with an RMSprop optimizer")

    _, rates = train("flag", "--optimizer", "sgd", "--learning-rate", "0.01")
    check(all(abs(lr - 0.01) < 1e-9 for _, lr in rates),
          f"--optimizer/--learning-rate override the archive's optimizer: {rates}")

    model.compile(optimizer=keras.optimizers.Lion(),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    lion = os.path.join(tmp, "lion.keras")
    model.save(lion)
    msg = mwtrain("train", "--model", lion, "--epochs", "1", "--steps-per-epoch", "1",
                  "--checkpoint-dir", tmp + "/lk", "--summary-dir", "", expect=2)
    check(f"{lion}: config.json: compile_config.optimizer" in msg and "Lion" in msg,
          f"an optimizer mwtrain lacks is refused naming the archive and the key: {msg.strip()}")
finish()
