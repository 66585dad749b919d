"""Which language a word comes from: a sequence classifier on real text the machine has without
a download, mwtrain under `mpirun -n 2` against the same model in
Keras for the same steps.

The data: Debian's word lists (wamerican, wngerman, wfrench, wspanish: /usr/share/dict/
american-english, ngerman, french, spanish), lower-case words of 3 to 20 UTF-8 bytes made of
letters only, a word in two lists dropped (it names no language), NPER of each language drawn
with a fixed seed, a tenth held out. A word is its UTF-8 bytes as token ids (1..255), padded
with 0 to 20; its label the language (0 English, 1 German, 2 French, 3 Spanish).

The model (Keras 3 Functional, saved as .keras, which mwtrain reads): Embedding(256, 32,
mask_zero=True) -> a Transformer block (MultiHeadAttention(4 heads of 8) on (x, x) -> Add ->
LayerNormalization -> Dense(64, relu) -> Dense(32) -> Add -> LayerNormalization) ->
GlobalAveragePooling1D (the padding masked out) -> Dense(4); Adam(1e-3), sparse cross-entropy
from logits, accuracy; batch 64, EPOCHS epochs (15).

mwtrain trains the archive under `mpirun -n 2` (32 per rank); Keras trains the same archive
with fit() (batch 64, shuffled) for 3 seeds. Printed: each one's validation loss and accuracy,
Keras' mean and spread, and whether mwtrain is within noise: within max(3 standard deviations,
1.5 points of accuracy / 0.05 of loss) of Keras' mean.

  langid.py MWTRAIN WORKDIR [--per-language 4000] [--epochs 6]
(tests/bench/langid.sh makes the Keras environment and runs it.)"""
import argparse
import json
import os
import re
import subprocess
import sys
import unicodedata
import warnings

os.environ.setdefault("KERAS_BACKEND", "jax")
warnings.filterwarnings("ignore")
import numpy as np  # noqa: E402

LISTS = [("English", "/usr/share/dict/american-english", "wamerican"),
         ("German", "/usr/share/dict/ngerman", "wngerman"),
         ("French", "/usr/share/dict/french", "wfrench"),
         ("Spanish", "/usr/share/dict/spanish", "wspanish")]
T = 20


def words(path):
    out = set()
    with open(path, encoding="utf-8", errors="strict") as f:
        for w in f:
            w = w.strip()
            if w and w == w.lower() and all(unicodedata.category(c).startswith("L") for c in w):
                b = w.encode("utf-8")
                if 3 <= len(b) <= T:
                    out.add(b)
    return out


def make_data(path, per, seed=5):
    sets = []
    for name, p, pkg in LISTS:
        if not os.path.exists(p):
            sys.exit("langid: %s is missing (Debian package %s; deploy/setup.sh installs it)"
                     % (p, pkg))
        sets.append(words(p))
    seen = {}
    for s in sets:
        for w in s:
            seen[w] = seen.get(w, 0) + 1
    rng = np.random.default_rng(seed)
    xs, ys = [], []
    for k, s in enumerate(sets):
        only = sorted(w for w in s if seen[w] == 1)
        pick = rng.choice(len(only), size=min(per, len(only)), replace=False)
        for i in pick:
            b = only[i]
            row = np.zeros(T, np.uint8)
            row[:len(b)] = np.frombuffer(b, np.uint8)
            xs.append(row)
            ys.append(k)
    x, y = np.stack(xs), np.array(ys, np.int32)
    order = rng.permutation(len(x))
    x, y = x[order], y[order]
    n_test = len(x) // 10
    np.savez(path, x_train=x[n_test:], y_train=y[n_test:], x_test=x[:n_test], y_test=y[:n_test])
    return x[n_test:], y[n_test:], x[:n_test], y[:n_test]


def build(seed=1):
    import keras
    L = keras.layers
    keras.utils.set_random_seed(seed)
    inp = keras.Input((T,), dtype="int32", name="bytes")
    x = L.Embedding(256, 32, mask_zero=True, name="embed")(inp)
    a = L.MultiHeadAttention(4, 8, name="att")(x, x)
    x = L.LayerNormalization(name="ln1")(L.Add(name="res1")([x, a]))
    f = L.Dense(32, name="ff2")(L.Dense(64, activation="relu", name="ff1")(x))
    x = L.LayerNormalization(name="ln2")(L.Add(name="res2")([x, f]))
    out = L.Dense(4, name="language")(L.GlobalAveragePooling1D(name="pool")(x))
    m = keras.Model(inp, out, name="langid")
    m.compile(optimizer=keras.optimizers.Adam(1e-3),
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
              metrics=["accuracy"])
    return m


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mwtrain")
    p.add_argument("work")
    p.add_argument("--per-language", type=int, default=4000)
    p.add_argument("--epochs", type=int, default=15)
    a = p.parse_args()
    os.makedirs(a.work, exist_ok=True)
    data, model = os.path.join(a.work, "langid.npz"), os.path.join(a.work, "langid.keras")
    x, y, xt, yt = make_data(data, a.per_language)
    print("langid: %d training words, %d held out, 4 languages" % (len(x), len(xt)))
    import keras
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "keras"))
    os.environ.setdefault("MW_BUILDDIR", os.path.dirname(os.path.dirname(a.mwtrain)))
    import oracle  # noqa: F401  (its fix of Keras 3.6's stale masks: see fix_keras_mask_ids)
    build().save(model)
    logs = os.path.join(a.work, "logs")
    cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-n", "2", a.mwtrain, "train",
           "--model", model, "--data", data, "--epochs", str(a.epochs), "--batch-per-replica",
           "32", "--threads", "1", "--test-examples", str(len(xt)), "--progress", "none",
           "--summary-dir", logs, "--checkpoint-dir", os.path.join(a.work, "ck")]
    print("$ " + " ".join(cmd))
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("langid: mwtrain failed (exit %d):\n%s" % (r.returncode, r.stderr[-2000:]))
    print(r.stdout.strip().splitlines()[-1])
    last = r.stdout.strip().splitlines()[-1]
    mw_loss = float(re.search(r"Test Loss: ([0-9.]+)", last).group(1))
    mw_acc = float(re.search(r"Test Accuracy: ([0-9.]+)", last).group(1))
    ks = []
    for seed in (1, 2, 3):
        keras.utils.set_random_seed(seed)
        k = keras.models.load_model(model)
        k.fit(x, y, batch_size=64, epochs=a.epochs, shuffle=True, verbose=0)
        ev = k.evaluate(xt, yt, batch_size=256, verbose=0, return_dict=True)
        ks.append((ev["loss"], 100 * ev["accuracy"]))
        print("keras seed %d: validation loss %.4f, accuracy %.2f %%" % (seed, *ks[-1]))
    kl, ka = np.array([k[0] for k in ks]), np.array([k[1] for k in ks])
    ok_l = abs(mw_loss - kl.mean()) <= max(3 * kl.std(ddof=1), 0.05)
    ok_a = abs(mw_acc - ka.mean()) <= max(3 * ka.std(ddof=1), 1.5)
    print("| | validation loss | accuracy |\n|---|---|---|")
    print("| mwtrain, `mpirun -n 2` | %.4f | %.2f %% |" % (mw_loss, mw_acc))
    print("| Keras `fit`, 3 seeds | %.4f ± %.4f | %.2f ± %.2f %% |" %
          (kl.mean(), kl.std(ddof=1), ka.mean(), ka.std(ddof=1)))
    print("langid: mwtrain within noise of Keras: loss %s, accuracy %s" %
          ("yes" if ok_l else "NO", "yes" if ok_a else "NO"))
    json.dump({"mwtrain": [mw_loss, mw_acc], "keras": ks}, open(os.path.join(a.work,
                                                                            "result.json"), "w"))
    return 0 if ok_l and ok_a else 1


if __name__ == "__main__":
    sys.exit(main())
