"""A KerasHub causal LM trained on real text the machine has without a download: mwtrain under
`mpirun -n 2` against KerasHub's own training of the same archive over 3 shuffle seeds.

The data: the license texts of Debian's base-files (/usr/share/common-licenses/*, symlinks
skipped), split BY FILE into training and validation (every fourth file, in name order, held
out, so the validation texts are unseen licenses, not unseen windows of seen ones). A text is
its bytes as token ids 1..256 (0 is padding, which full windows never hold); windows of T + 1
bytes every T bytes, the first T the inputs (x.token_ids, x.padding_mask all 1), the last T the
labels (the next byte at each position).

The model: KerasHub 0.32's LlamaCausalLM (default; --arch gpt2: GPT2CausalLM) of width 64,
2 layers, 4 query heads and 2 key-value heads (grouped-query attention), ff 128, untrained,
saved by KerasHub; Adam(1e-3), KerasHub's default loss and weighted accuracy; batch 32,
EPOCHS epochs.

mwtrain trains the archive under `mpirun -n 2` (16 per rank); KerasHub trains the same
archive with Keras' fit (batch 32, shuffled) for 3 seeds. Printed: each one's validation loss
and accuracy, KerasHub's mean and spread, and whether mwtrain is within noise: within max(3
standard deviations, 0.05) of KerasHub's mean loss.

  hub_text_lm.py MWTRAIN WORKDIR [--arch llama|gpt2] [--epochs 3] [--windows 3000]
(tests/bench/hub_text_lm.sh makes the Keras environment and runs it.)"""
import argparse
import glob
import os
import subprocess
import sys
import warnings

os.environ.setdefault("KERAS_BACKEND", "jax")
warnings.filterwarnings("ignore")
import numpy as np  # noqa: E402

T, B, LR = 64, 32, 1e-3
LICENSES = "/usr/share/common-licenses"


def windows(paths, limit):
    out = []
    for p in paths:
        ids = np.frombuffer(open(p, "rb").read(), np.uint8).astype(np.int32) + 1
        for s in range(0, len(ids) - T - 1, T):
            out.append(ids[s:s + T + 1])
    rng = np.random.default_rng(0)
    out = np.array(out, np.int32)
    return out[rng.permutation(len(out))[:limit]] if len(out) > limit else out


def make_data(path, limit):
    files = sorted(p for p in glob.glob(LICENSES + "/*") if os.path.isfile(p)
                   and not os.path.islink(p))
    if len(files) < 4:
        sys.exit("hub_text_lm: %s holds %d texts; expected Debian's base-files" % (LICENSES,
                                                                                     len(files)))
    val = [p for i, p in enumerate(files) if i % 4 == 3]
    tr, va = windows([p for p in files if p not in val], limit), windows(val, limit // 4)
    arrays = {}
    for split, w in (("train", tr), ("test", va)):
        arrays["x_%s.token_ids" % split] = w[:, :T]
        arrays["x_%s.padding_mask" % split] = np.ones((len(w), T), np.int32)
        arrays["y_" + split] = w[:, 1:]
    np.savez(path, **arrays)
    print("data: %d training windows from %d files, %d validation windows from %d other files"
          % (len(tr), len(files) - len(val), len(va), len(val)), flush=True)
    return arrays


def model(arch, path):
    import keras
    import keras_hub
    keras.utils.set_random_seed(1)
    if arch == "llama":
        bb = keras_hub.models.LlamaBackbone(vocabulary_size=260, num_layers=2, num_query_heads=4,
                                            num_key_value_heads=2, hidden_dim=64,
                                            intermediate_dim=128)
        lm = keras_hub.models.LlamaCausalLM(backbone=bb, preprocessor=None)
    else:
        bb = keras_hub.models.GPT2Backbone(vocabulary_size=260, num_layers=2, num_heads=4,
                                           hidden_dim=64, intermediate_dim=128,
                                           max_sequence_length=T, dropout=0.0)
        lm = keras_hub.models.GPT2CausalLM(backbone=bb, preprocessor=None)
    lm.compile(optimizer=keras.optimizers.Adam(LR))
    lm.save(path)


def keras_run(path, a, epochs, seed):
    """KerasHub's training of the archive: Keras' own fit (KerasHub's wants TensorFlow or grain
    for its data pipeline; with no preprocessor it only batches), recompiled as saved (KerasHub
    does not restore a task's compile)."""
    import keras
    keras.utils.set_random_seed(seed)
    k = keras.saving.load_model(path)
    k.compile(optimizer=keras.optimizers.Adam(LR))
    x = {n: a["x_train." + n] for n in ("token_ids", "padding_mask")}
    keras.Model.fit(k, x, a["y_train"], batch_size=B, epochs=epochs, shuffle=True, verbose=0)
    xv = {n: a["x_test." + n] for n in ("token_ids", "padding_mask")}
    r = keras.Model.evaluate(k, xv, a["y_test"], batch_size=B, verbose=0, return_dict=True)
    return r["loss"], 100 * r["sparse_categorical_accuracy"]


def mwtrain_run(mw, work, path, data, epochs):
    ck, logs = os.path.join(work, "ck"), os.path.join(work, "logs")
    cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-n", "2", mw, "train",
           "--model", path, "--data", data, "--epochs", str(epochs), "--batch-per-replica",
           str(B // 2), "--threads", "1", "--progress", "none", "--checkpoint-dir", ck,
           "--summary-dir", logs]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode:
        sys.exit("mwtrain: exit %d\n%s" % (p.returncode, p.stderr[-1500:]))
    rows = [line.split(",") for line in open(os.path.join(logs, "metrics.csv")).read().split()]
    last = dict(zip(rows[0], rows[-1]))
    return float(last["test/loss"]), 100 * float(last["test/accuracy"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mwtrain")
    ap.add_argument("work")
    ap.add_argument("--arch", choices=("llama", "gpt2"), default="llama")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--windows", type=int, default=3000)
    o = ap.parse_args()
    data, path = os.path.join(o.work, "text.npz"), os.path.join(o.work, o.arch + ".keras")
    a = make_data(data, o.windows)
    model(o.arch, path)
    loss, acc = mwtrain_run(os.path.abspath(o.mwtrain), o.work, path, data, o.epochs)
    print("mwtrain, mpirun -n 2:  validation loss %.4f  accuracy %.2f %%" % (loss, acc),
          flush=True)
    ks = [keras_run(path, a, o.epochs, seed) for seed in (1, 2, 3)]
    for seed, (kl, ka) in zip((1, 2, 3), ks):
        print("KerasHub fit, seed %d: validation loss %.4f  accuracy %.2f %%" % (seed, kl, ka))
    kl = np.array([k[0] for k in ks])
    ka = np.array([k[1] for k in ks])
    tol = max(3 * kl.std(ddof=1), 0.05)
    print("KerasHub: %.4f +- %.4f (accuracy %.2f +- %.2f %%); mwtrain %+.4f from the mean, %s "
          "(tolerance %.4f)" % (kl.mean(), kl.std(ddof=1), ka.mean(), ka.std(ddof=1),
                                loss - kl.mean(), "within noise" if abs(loss - kl.mean()) <= tol
                                else "OUTSIDE noise", tol))
    sys.exit(0 if abs(loss - kl.mean()) <= tol else 1)


if __name__ == "__main__":
    main()
