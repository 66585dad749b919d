"""Token models against real Keras (suite 'keras'): integer token ids
(N, T) in a .npz, a Keras Input((T,), dtype="int32") -> Embedding -> GlobalAveragePooling1D
(or GlobalMaxPooling1D) -> Dense(K), saved with model.save() after compile (SGD(0.1), sparse
cross-entropy from logits, accuracy).

For each case mwtrain starts from the archive's weights (its --epochs 0 --dump-weights equals
Keras' own bit for bit) and trains one epoch of 2 steps of 32 with --no-shuffle; Keras trains
the same archive with fit(shuffle=False). Asserted:
  - the weights after 2 steps (the embeddings among them) within 1e-4 relative to the
    variable's largest value (the argument is tests/keras/loss_e2e.py's: a gradient entry is
    a sum of at most 32 x 12 products, each with a few float32 roundings, summed in other
    orders by XLA and by mwtrain: ~sqrt(384) x 6e-8 = 1.2e-6, and the first layer's entries
    are sums of copies, no transcendental; 1e-4 leaves room for the softmax's exp/log);
  - the train and test loss within 1e-4 relative, the accuracies within 1e-6 (shares of 64
    and 32 examples, or of their N x 12 positions: Keras' float32 quotient);
  - the epoch line's throughput is Tokens/s (examples x positions), metrics.csv's
    tokens_per_sec;
  - layouts: `mpirun -n 2` with 16 per replica and 2 replicas of 16 in one process against
    one process of 32, within 1e-5 (only the order of the float32 sums changes: the
    embedding rows two ranks both touch are added across ranks); the control, a global batch
    of 64, differs by more;
  - `export --format keras` after training: Keras loads the archive, and its evaluate() of the
    test set equals mwtrain's test loss within 1e-5 relative (the same weights, a mean of 32
    float32 losses);
  - refused with one message naming the file, the example and the position: a token id at
    or above the Embedding's input_dim, a negative id (at load), float32 features given to an
    Embedding model; a padding mask reaching a layer that cannot take it yet
    (GlobalMaxPooling1D).
A case with LayerNormalization (epsilon 1e-3, gamma and beta) and a Dense(16, relu) applied to
each position between the Embedding and the pooling (the Transformer block's parts), and one
with Conv1D (same and valid padding, a stride of 2) and MaxPooling1D / AveragePooling1D, the
same way; two taggers (labels (N, T), a loss per position): LayerNormalization and Dense on
each position, and a causal Conv1D. A padded case: Embedding(mask_zero=True) -> GlobalAveragePooling1D, sequences 1..T long, the
rest id 0: Keras' masked mean (the sum over the real steps / their number), against Keras
and across the layouts like the first case.

Two Transformer blocks of core layers (Functional): Embedding -> MultiHeadAttention(2 heads,
key_dim 4; Keras 3.15's JAX attention fails on a value_dim other than key_dim, which the
gradient checks of test_keras cover) on (x, x) -> Add -> LayerNormalization -> Dense(16, gelu) -> Dense ->
Add -> LayerNormalization, then
  - a classifier: Embedding(mask_zero=True), padded sequences, GlobalAveragePooling1D, Dense:
    the padding mask reaches the attention (query and value masks, which Keras 3 writes into
    the graph as NotEqual / LogicalOr operation layers) and the pooling; its control is Keras
    without mask_zero;
  - a causal block (use_causal_mask) with Dense(K) on each position and labels (N, T), the
    shape of a GPT; its control is Keras without the causal mask, and its layouts go on to 1
    rank x 4 replicas and 2 nodes x 2 ranks (TF_CONFIG's hosts; not in the AVX2 pass).
  - a tagger padded (Embedding(mask_zero=True), LayerNormalization and Dense on each
    position, sequences 1..T long) with SparseCategoricalCrossentropy(ignore_class=1): the
    padding mask reaches the output, and the loss counts the positions that are neither
    padding nor labelled 1, divided by the global batch's number of them; the token accuracy
    counts the positions that are not padding (Keras' metrics get the output's mask, not the
    loss's ignore_class; for training, Keras' own metric on each step's output:
    masked_train_accuracy says why not fit()'s history); controls: Keras without mask_zero,
    and without ignore_class;
  - the causal block padded, with ignore_class=1. Keras 3.15's MultiHeadAttention deletes its
    inputs' masks when it runs, so the residual Add after it, and the output, carry none: the
    loss counts every position not labelled 1, the accuracy every position (worker/model/
    layers/embedding.c, plan_run_time); controls as the tagger's; its layouts as the causal
    block's.
For the Transformers, the checkpoint of the 2 steps is exported and Keras' logits of that archive
equal those of the model Keras trained itself within 1e-5 of the largest.
The attention's key bias has a zero gradient in exact arithmetic, so its values after training
are rounding noise on both sides: rel_err measures every variable against at least 1e-6.

usage: text_e2e.py MWTRAIN WORKDIR"""
import json
import os
import re
import shutil
import subprocess
import sys
import warnings
import zipfile

os.environ.setdefault("KERAS_BACKEND", "jax")
warnings.filterwarnings("ignore")
import keras  # noqa: E402
import numpy as np  # noqa: E402
from keras.src.backend.common.masking import get_keras_mask  # noqa: E402  (no public name)
from oracle import check, finish, metrics_rows  # noqa: E402

N_TRAIN, N_TEST, T, V, D, K, B, LR = 64, 32, 12, 50, 8, 3, 32, 0.1
IGNORE = 1  # the padded GPT's ignore_class
TOL_W, TOL_LOSS, TOL_LAYOUT, TOL_EXPORT = 1e-4, 1e-4, 1e-5, 1e-5


def build(pool, seed, mask_zero=False, ln=None, ignore="auto"):
    """ln "ln": LayerNormalization and a Dense(16, relu) on each position between the
    Embedding and the pooling; "conv": Conv1D(10, 3, relu, same), MaxPooling1D(2),
    Conv1D(6, 2, strides 2, valid), AveragePooling1D(2, padding same). "padtag", "padgpt":
    "tag" and "gpt" with the loss's ignore_class IGNORE (unless ignore says otherwise)."""
    keras.utils.set_random_seed(seed)
    ignore = (IGNORE if ln in ("padtag", "padgpt") else None) if ignore == "auto" else ignore
    if ln in ("mha", "gpt", "padgpt"):
        return build_transformer(seed, mask_zero, causal=ln != "mha", ignore=ignore)
    p = keras.layers.GlobalMaxPooling1D() if pool == "max" else \
        keras.layers.GlobalAveragePooling1D()
    L = keras.layers
    body = {"ln": [L.LayerNormalization(name="norm"), L.Dense(16, activation="relu", name="ff")],
            "conv": [L.Conv1D(10, 3, activation="relu", padding="same", name="c1"),
                     L.MaxPooling1D(2, name="p1"), L.Conv1D(6, 2, strides=2, name="c2"),
                     L.AveragePooling1D(2, padding="same", name="p2")]}.get(ln, [])
    if ln in ("tag", "padtag"):  # a label per position: no pooling, the head on each position
        body, p = [L.LayerNormalization(name="norm"), L.Dense(16, activation="relu", name="ff")], None
    if ln == "causal":  # each position sees itself and the 2 before: a next-token model's shape
        body, p = [L.Conv1D(12, 3, padding="causal", activation="relu", name="c1")], None
    m = keras.Sequential([keras.Input((T,), dtype="int32"),
                          keras.layers.Embedding(V, D, mask_zero=mask_zero, name="embed"),
                          *body, *([p] if p else []), keras.layers.Dense(K, name="head")])
    m.compile(optimizer=keras.optimizers.SGD(LR),
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True,
                                                              ignore_class=ignore),
              metrics=["accuracy"])
    return m


def build_transformer(seed, mask_zero, causal, per_position=None, ignore=None):
    """A Transformer block from core layers (Functional): Embedding -> MultiHeadAttention(2
    heads, key_dim 4) called on (x, x) -> Add -> LayerNormalization -> Dense(16,
    gelu) -> Dense(D) -> Add -> LayerNormalization, then GlobalAveragePooling1D -> Dense(K) (a
    classifier; with mask_zero the padding mask reaches the attention and the pooling), or
    (causal) use_causal_mask and Dense(K) on each position (a next-token model's shape);
    ignore: the loss's ignore_class."""
    L = keras.layers
    keras.utils.set_random_seed(seed)
    inp = keras.Input((T,), dtype="int32", name="ids")
    x = L.Embedding(V, D, mask_zero=mask_zero, name="embed")(inp)
    a = L.MultiHeadAttention(2, 4, name="att")(x, x, use_causal_mask=causal)
    x = L.LayerNormalization(name="ln1")(L.Add(name="res1")([x, a]))
    f = L.Dense(D, name="ff2")(L.Dense(16, activation="gelu", name="ff1")(x))
    x = L.LayerNormalization(name="ln2")(L.Add(name="res2")([x, f]))
    if not (causal if per_position is None else per_position):
        x = L.GlobalAveragePooling1D(name="pool")(x)
    m = keras.Model(inp, L.Dense(K, name="head")(x))
    m.compile(optimizer=keras.optimizers.SGD(LR),
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True,
                                                              ignore_class=ignore),
              metrics=["accuracy"])
    return m


def signal_tokens(rng, n):
    """n labels and (n, T) token ids whose first 4 come from the label's third of the
    vocabulary, the rest uniform over 1..V-1."""
    y = rng.integers(0, K, n)
    x = rng.integers(1, V, (n, T))
    lo = 1 + y * ((V - 1) // K)
    x[:, :4] = lo[:, None] + rng.integers(0, (V - 1) // K, (n, 4))
    return y, x


def make_data(path, seed, dtype, padded=False, tags=False):
    """Token ids with a signal: the label is which third of the vocabulary the first tokens
    come from most (learnable by a bag of embeddings), the rest uniform (ids 1..V-1); padded:
    each sequence 1..T long, the rest id 0."""
    rng = np.random.default_rng(seed)
    n = N_TRAIN + N_TEST
    y, x = signal_tokens(rng, n)
    if padded:
        for i, length in enumerate(rng.integers(1, T + 1, n)):
            x[i, length:] = 0
    if tags:  # a label per position: a token's class (its id mod K), noisy
        y = (x % K + (rng.random((n, T)) < 0.2)) % K
    x = x.astype(dtype)
    np.savez(path, x_train=x[:N_TRAIN], y_train=y[:N_TRAIN].astype(np.int32),
             x_test=x[N_TRAIN:], y_test=y[N_TRAIN:].astype(np.int32))
    return x[:N_TRAIN], y[:N_TRAIN], x[N_TRAIN:], y[N_TRAIN:]


def compiled(inputs, out):
    """keras.Model(inputs, out) compiled as every case of these tests is: SGD(LR), the sparse
    cross-entropy from logits, accuracy."""
    m = keras.Model(inputs, out)
    m.compile(optimizer=keras.optimizers.SGD(LR),
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
              metrics=["accuracy"])
    return m


def print_table(table, oracle="Keras"):
    """The cases' errors (weights, loss, test loss), one row each, then the checks' verdict
    (oracle.finish: exits 1 after failures)."""
    print("%-44s %-9s %-9s %s" % ("case (2 SGD steps vs %s)" % oracle, "weights", "loss",
                                  "test loss"))
    print("\n".join(table))
    finish()


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True)


LAST_STDERR = [""]  # the last mwtrain's messages (its start-up line names the layout)


def mwtrain(mw, work, tag, model, data, *args, launcher=(), bpr=B):
    cmd = [*launcher, mw, "train", "--data", data, "--model", model, "--batch-per-replica",
           str(bpr), "--threads", "1", "--no-shuffle", "--test-examples", str(N_TEST),
           "--summary-dir", os.path.join(work, tag + "-logs"), "--checkpoint-dir",
           os.path.join(work, tag + "-ck"), "--progress", "none", *args]
    r = run(cmd)
    LAST_STDERR[0] = r.stderr
    if not check(r.returncode == 0, "%s: exit %d%s" % (tag, r.returncode,
                                                        "\n" + r.stderr[-800:] if r.returncode
                                                        else "")):
        return None
    return r.stdout


def split(flat, shapes):
    cuts = np.cumsum([int(np.prod(s)) for s in shapes])[:-1]
    return [a.reshape(s) for a, s in zip(np.split(flat, cuts), shapes)]


NOISE = 1e-8  # below this a variable holds rounding noise only (see rel_err)


def rel_err(got, want):
    """The largest error of each variable relative to its largest value. The attention's key
    bias has a zero gradient in exact arithmetic (a softmax does not change when a row's
    scores all move by q . b), so after training it holds rounding noise (1e-12 to 1e-10) in
    Keras and here alike, different noise: such a variable (every value below NOISE on the
    reference side) must be noise on this side too, and counts 0 when it is (a variable that
    learns moves by more than 1e-4 in these 2 steps of SGD(0.1))."""
    def one(g, w):
        g, w = np.ravel(g), np.ravel(w)
        if w.size and np.max(np.abs(w)) < NOISE:
            return 0.0 if np.max(np.abs(g)) < NOISE else float(np.max(np.abs(g)) / NOISE)
        return float(np.max(np.abs(g - w)) / max(np.max(np.abs(w)), 1e-30))
    return max(one(g, w) for g, w in zip(got, want))


def rel(a, b):
    return abs(a - b) / max(abs(b), 1e-30)


def losses(work, tag, name, h, ev, werr, table):
    """mwtrain's first epoch (metrics of run tag) against Keras' fit() history h and evaluate()
    ev: the train and test losses within TOL_LOSS; the case's row of the table."""
    row = metrics_rows(os.path.join(work, tag + "-logs"))[0]
    lerr, terr = rel(row["train/loss"], h["loss"][0]), rel(row["test/loss"], ev["loss"])
    check(lerr <= TOL_LOSS and terr <= TOL_LOSS,
          "%s: train loss %.9g, test loss %.9g = Keras' %.9g, %.9g" %
          (name, row["train/loss"], row["test/loss"], h["loss"][0], ev["loss"]))
    table.append("%-44s %.2e  %.2e  %.2e" % (name, werr, lerr, terr))


def patch_layer(path, layer, keys):
    """The archive at path with keys set in the config of its layer named layer (a setting
    Keras cannot build, written as Keras would)."""
    with zipfile.ZipFile(path) as z:
        items = {n: z.read(n) for n in z.namelist()}
    cfg = json.loads(items["config.json"])
    next(e for e in cfg["config"]["layers"] if e["name"] == layer)["config"].update(keys)
    items["config.json"] = json.dumps(cfg).encode()
    with zipfile.ZipFile(path, "w") as z:
        for n, b in items.items():
            z.writestr(n, b)


def one_case(mw, work, name, pool, dtype, seed, table, mask=False, ln=False, control=True):
    tag = "%s-%s%s%s" % (pool, np.dtype(dtype).name, "-mask" if mask else "", "-" + ln if ln else "")
    data = os.path.join(work, tag + ".npz")
    x, y, xt, yt = make_data(data, seed, dtype, padded=mask,
                             tags=ln in ("tag", "padtag", "causal") or str(ln).endswith("gpt"))
    model = build(pool, seed, mask_zero=mask, ln=ln)
    path = os.path.join(work, tag + ".keras")
    model.save(path)
    shapes = [tuple(w.shape) for w in model.weights]
    init = os.path.join(work, tag + "-init.bin")
    if mwtrain(mw, work, tag + "-init", path, data, "--epochs", "0", "--dump-weights",
               init) is None:
        return None
    init_w = split(np.fromfile(init, "<f4"), shapes)
    check(all(np.array_equal(a, np.asarray(w)) for a, w in zip(init_w, model.weights)),
          "%s: mwtrain's initial weights are the archive's (embeddings included)" % name)
    out = os.path.join(work, tag + "-w.bin")
    stdout = mwtrain(mw, work, tag, path, data, "--epochs", "1", "--steps-per-epoch", "2",
                     "--dump-weights", out)
    if stdout is None:
        return None
    got = split(np.fromfile(out, "<f4"), shapes)
    k = keras.models.load_model(path)
    h = k.fit(x, y, batch_size=B, epochs=1, shuffle=False, verbose=0).history
    ev = k.evaluate(xt, yt, batch_size=N_TEST, verbose=0, return_dict=True)
    werr = rel_err(got, k.get_weights())
    check(werr <= TOL_W, "%s: weights after 2 steps, relative %.2e <= %g" % (name, werr, TOL_W))
    if str(ln).endswith(("mha", "gpt", "pos", "sine", "enc")) and "ONEDNN_MAX_CPU_ISA" not in os.environ:
        # the 2 steps' checkpoint exported: Keras' logits of the archive are those of the
        # model Keras trained itself, within 1e-5 of the largest (the weights agree to 2e-6)
        ex = os.path.join(work, tag + "-2steps.keras")
        p = run([mw, "export", "--checkpoint-dir", os.path.join(work, tag + "-ck"), "--format",
                 "keras", "--output", ex])
        if check(p.returncode == 0, "%s: export after 2 steps (exit %d) %s" %
                 (name, p.returncode, p.stderr[-300:] if p.returncode else "")):
            want = np.asarray(k.predict(xt, batch_size=N_TEST, verbose=0))
            mine = np.asarray(keras.models.load_model(ex).predict(xt, batch_size=N_TEST,
                                                                  verbose=0))
            e = float(np.max(np.abs(mine - want)) / np.max(np.abs(want)))
            check(e <= TOL_EXPORT, "%s: the exported archive's logits %s = Keras' own, "
                  "relative %.2e <= %g" % (name, mine.shape, e, TOL_EXPORT))
    controls = []  # the same weights and batches without the causal mask, or the padding mask
    if ln == "gpt":
        controls.append(("use_causal_mask",
                         build_transformer(seed, False, causal=False, per_position=True)))
    if ln in ("padtag", "padgpt"):
        controls.append(("ignore_class", build(pool, seed, mask_zero=True, ln=ln, ignore=None)))
    if mask and control:
        controls.append(("mask_zero", build(pool, seed, mask_zero=False, ln=ln)))
    for what, u in controls:
        u.set_weights(init_w)
        u.fit(x, y, batch_size=B, epochs=1, shuffle=False, verbose=0)
        e = rel_err(got, u.get_weights())
        check(e > TOL_W, "control: %s against Keras without %s differs, %.2e > %g"
              % (name, what, e, TOL_W))
    row = metrics_rows(os.path.join(work, tag + "-logs"))[0]
    lerr, terr = rel(row["train/loss"], h["loss"][0]), rel(row["test/loss"], ev["loss"])
    check(lerr <= TOL_LOSS and terr <= TOL_LOSS,
          "%s: train loss %.9g, test loss %.9g = Keras' %.9g, %.9g" %
          (name, row["train/loss"], row["test/loss"], h["loss"][0], ev["loss"]))
    if get_keras_mask(k(x[:B])) is not None:  # Keras' output keeps the mask: see
        h = dict(h, accuracy=[masked_train_accuracy(path, x, y)])  # masked_train_accuracy
    # a share of 64 (or 64 x 12 positions) counts: Keras' float32 quotient against mwtrain's
    # double, so within float32's rounding of a number below 1 (6e-8); 1e-6 allows it
    check(abs(row["train/accuracy"] - h["accuracy"][0]) <= 1e-6 and
          abs(row["test/accuracy"] - ev["accuracy"]) <= 1e-6,
          "%s: accuracy %.6g, test %.6g = Keras' %.6g, %.6g" %
          (name, row["train/accuracy"], row["test/accuracy"], h["accuracy"][0],
           ev["accuracy"]))
    check("tokens_per_sec" in row and re.search(r", Tokens/s: \d+", stdout) is not None,
          "%s: the throughput is Tokens/s (metrics.csv %s): %s" %
          (name, sorted(row), stdout.strip().splitlines()[-1] if stdout.strip() else ""))
    table.append("%-44s %.2e  %.2e  %.2e" % (name, werr, lerr, terr))
    return dict(path=path, data=data, weights=got, shapes=shapes, xt=xt, yt=yt)


def masked_train_accuracy(path, x, y):
    """The training accuracy of the 2 steps as Keras' metric computes it on an output that
    carries the padding mask (MeanMetricWrapper weighs by y_pred's mask): each step's output
    before its update, through keras.metrics.SparseCategoricalAccuracy. Keras 3.15's JAX
    trainer reports another number in fit()'s history: it computes the training metrics on
    the y_pred that jax.value_and_grad hands back as aux, a new array without the mask, so
    the padded positions count there (and not in evaluate(), nor on TensorFlow, where the
    metric sees the mask)."""
    k = keras.models.load_model(path)
    acc = keras.metrics.SparseCategoricalAccuracy()
    for b in range(2):
        xb, yb = x[b * B:(b + 1) * B], y[b * B:(b + 1) * B]
        acc.update_state(yb, k(xb))
        k.fit(xb, yb, batch_size=B, epochs=1, shuffle=False, verbose=0)
    return float(acc.result())


def layouts(mw, work, name, r, prefix="", more=False):
    """more: also 1 rank x 4 replicas, and 2 nodes x 2 ranks (TF_CONFIG's hosts: shared memory
    within a node, the MPI ring between them)."""
    mpirun = shutil.which("mpirun")
    if not check(mpirun is not None, "layouts: mpirun is on the PATH"):
        return
    mpi = [mpirun, "--allow-run-as-root", "--oversubscribe", "-n", "2"]
    two_nodes = json.dumps({"cluster": {"worker": ["node-a:1", "node-a:2", "node-b:1",
                                                   "node-b:2"]},
                            "task": {"type": "worker", "index": 0}})
    mpi4 = [mpirun, "--allow-run-as-root", "--oversubscribe", "-n", "4", "-x",
            "TF_CONFIG=" + two_nodes]
    extra_layouts = [("rpw4", [], ["--replicas-per-worker", "4"], B // 4),
                     ("nodes2x2", mpi4, [], B // 4)] if more else []
    for tag, launcher, extra, bpr in [("mpi2", mpi, [], B // 2),
                                      ("rpw2", [], ["--replicas-per-worker", "2"], B // 2),
                                      *extra_layouts, ("control", mpi, [], B)]:
        out = os.path.join(work, "%slay-%s.bin" % (prefix, tag))
        if mwtrain(mw, work, prefix + "lay-" + tag, r["path"], r["data"], "--epochs", "1",
                   "--steps-per-epoch", "2", "--dump-weights", out, *extra, launcher=launcher,
                   bpr=bpr) is None:
            continue
        e = rel_err(split(np.fromfile(out, "<f4"), r["shapes"]), r["weights"])
        if tag == "nodes2x2":
            check("4 rank(s) on 2 node(s)" in LAST_STDERR[0],
                  "layout: TF_CONFIG puts the 4 ranks on 2 nodes: %s" %
                  [s for s in LAST_STDERR[0].splitlines() if "rank(s) on" in s][:1])
        if tag == "control":
            check(e > TOL_LAYOUT, "layout control: %s, a global batch of 64 differs from 32 "
                  "by %.2e > %g" % (name, e, TOL_LAYOUT))
        else:
            check(e <= TOL_LAYOUT, "layout: %s, %s against 1 process: relative %.2e <= %g"
                  % (name, tag, e, TOL_LAYOUT))


def export(mw, work, name, r, prefix="ex"):
    ck, out = os.path.join(work, prefix + "-ck"), os.path.join(work, prefix + ".keras")
    logs = os.path.join(work, prefix + "-logs")
    p = run([mw, "train", "--model", r["path"], "--data", r["data"], "--epochs", "2",
             "--batch-per-replica", str(B), "--threads", "1", "--test-examples", str(N_TEST),
             "--progress", "none", "--summary-dir", logs, "--checkpoint-dir", ck])
    if p.returncode == 0:
        p = run([mw, "export", "--checkpoint-dir", ck, "--format", "keras", "--output", out])
    if not check(p.returncode == 0, "export %s: exit %d%s" % (
            name, p.returncode, "\n" + p.stderr[-600:] if p.returncode else "")):
        return
    m = keras.models.load_model(out)
    ev = m.evaluate(r["xt"], r["yt"], batch_size=N_TEST, verbose=0, return_dict=True)
    want = metrics_rows(logs)[-1]["test/loss"]
    check(rel(ev["loss"], want) <= TOL_EXPORT,
          "export %s: Keras' evaluate of the exported archive %.9g = mwtrain's test loss %.9g"
          % (name, ev["loss"], want))
    cfg = json.loads(zipfile.ZipFile(out).read("config.json"))
    classes = [lay["class_name"] for lay in cfg["config"]["layers"]]
    check("Embedding" in classes, "export %s: the archive's layers %s" % (name, classes))
    return classes


CORPUS = "/usr/share/common-licenses/GPL-3"  # Debian's base-files: on every Debian machine


def corpus_lm(mw, work, table):
    """A byte-level language model on a real text (--data FILE --sequence-length 32): the
    windows as data_text.c cuts them (32 + 1 bytes, 32 apart; the last tenth to validate),
    cut again here in numpy for Keras; Embedding(256, 16) -> Conv1D(32, 3, causal, relu) ->
    Dense(256) on each position, next-byte labels. 2 SGD steps against Keras', the layouts
    and the validation loss."""
    if not check(os.path.exists(CORPUS), "the corpus %s exists (base-files)" % CORPUS):
        return
    S = 32
    text = np.frombuffer(open(CORPUS, "rb").read(), np.uint8)
    n = (len(text) - 1) // S
    valid = (n + 9) // 10
    xs = text[:n * S].reshape(n, S).astype(np.int32)
    ys = text[1:n * S + 1].reshape(n, S).astype(np.int32)
    x, y, xt, yt = xs[:n - valid], ys[:n - valid], xs[n - valid:], ys[n - valid:]
    keras.utils.set_random_seed(19)
    L = keras.layers
    model = keras.Sequential([keras.Input((S,), dtype="int32"), L.Embedding(256, 16, name="emb"),
                              L.Conv1D(32, 3, padding="causal", activation="relu", name="c1"),
                              L.Dense(256, name="next")])
    model.compile(optimizer=keras.optimizers.SGD(LR),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    path = os.path.join(work, "lm.keras")
    model.save(path)
    shapes = [tuple(w.shape) for w in model.weights]
    out = os.path.join(work, "lm-w.bin")
    stdout = mwtrain(mw, work, "lm", path, CORPUS, "--sequence-length", str(S), "--epochs", "1",
                     "--steps-per-epoch", "2", "--dump-weights", out)
    if stdout is None:
        return
    got = split(np.fromfile(out, "<f4"), shapes)
    k = keras.models.load_model(path)
    h = k.fit(x[:2 * B], y[:2 * B], batch_size=B, epochs=1, shuffle=False, verbose=0).history
    ev = k.evaluate(xt[:N_TEST], yt[:N_TEST], batch_size=N_TEST, verbose=0, return_dict=True)
    werr = rel_err(got, k.get_weights())
    row = metrics_rows(os.path.join(work, "lm-logs"))[0]
    lerr, terr = rel(row["train/loss"], h["loss"][0]), rel(row["test/loss"], ev["loss"])
    check(werr <= TOL_W and lerr <= TOL_LOSS and terr <= TOL_LOSS,
          "corpus LM (%s, %d windows, %d to validate): weights %.2e, train loss %.9g = %.9g, "
          "validation loss %.9g = %.9g" % (CORPUS, n, valid, werr, row["train/loss"],
                                           h["loss"][0], row["test/loss"], ev["loss"]))
    check(abs(row["test/accuracy"] - ev["accuracy"]) <= 1e-6,
          "corpus LM: next-byte accuracy %.6g = Keras' %.6g" % (row["test/accuracy"],
                                                               ev["accuracy"]))
    table.append("%-44s %.2e  %.2e  %.2e" % ("byte LM on GPL-3 (--sequence-length 32)", werr,
                                             lerr, terr))
    mpirun = shutil.which("mpirun")
    if mpirun:
        o2 = os.path.join(work, "lm-mpi.bin")
        if mwtrain(mw, work, "lm-mpi", path, CORPUS, "--sequence-length", str(S), "--epochs", "1",
                   "--steps-per-epoch", "2", "--dump-weights", o2,
                   launcher=[mpirun, "--allow-run-as-root", "--oversubscribe", "-n", "2"],
                   bpr=B // 2) is not None:
            e = rel_err(split(np.fromfile(o2, "<f4"), shapes), got)
            check(e <= TOL_LAYOUT, "corpus LM: mpirun -n 2 against 1 process: relative %.2e "
                  "<= %g" % (e, TOL_LAYOUT))
    p = run([mw, "train", "--model", path, "--data", CORPUS, "--sequence-length", "9000",
             "--summary-dir", "", "--checkpoint-dir", os.path.join(work, "lm-bad")])
    last = ((p.stdout + p.stderr).strip().splitlines() or [""])[-1]
    check(p.returncode != 0 and "--sequence-length" in last and "4096" in last,
          "refused, --sequence-length 9000 (exit %d): %s" % (p.returncode, last))


def refusals(mw, work, r, tagger=None):
    """Each bad input is one error naming what is wrong and where."""
    d = dict(np.load(r["data"]))
    cases = []
    if tagger is not None:  # labels per position beside a pooled model, and the other way
        t = dict(np.load(tagger["data"]))
        path = os.path.join(work, "bad-tags.npz")
        np.savez(path, **dict(d, y_train=t["y_train"], y_test=t["y_test"]))
        p = run([mw, "train", "--model", r["path"], "--data", path, "--epochs", "1",
                 "--summary-dir", "", "--checkpoint-dir", os.path.join(work, "bad-tags-ck")])
        last = ((p.stdout + p.stderr).strip().splitlines() or [""])[-1]
        check(p.returncode != 0 and "labels (N, 12), one per position" in last and
              "(layer 'head') is (None, 3)" in last,
              "refused, labels (N, T) beside a pooled model (exit %d): %s" % (p.returncode, last))
        p = run([mw, "train", "--model", tagger["path"], "--data", r["data"], "--epochs", "1",
                 "--summary-dir", "", "--checkpoint-dir", os.path.join(work, "bad-tags2-ck")])
        last = ((p.stdout + p.stderr).strip().splitlines() or [""])[-1]
        check(p.returncode != 0 and "1 label(s) per example" in last and
              "is (None, 12, 3), one per position; expected labels (N, 12)" in last,
              "refused, labels (N,) beside a model with an output per position (exit %d): %s"
              % (p.returncode, last))
        p = run([mw, "train", "--model", tagger["path"], "--data", tagger["data"], "--loss", "mse",
                 "--epochs", "1", "--summary-dir", "", "--checkpoint-dir",
                 os.path.join(work, "bad-tags3-ck")])
        last = ((p.stdout + p.stderr).strip().splitlines() or [""])[-1]
        check(p.returncode != 0 and
              "--loss mse: a loss per position is SparseCategoricalCrossentropy, for now" in last and
              "(layer 'head')" in last,
              "refused, a loss per position other than the sparse one (exit %d): %s"
              % (p.returncode, last))
    big = d["x_train"].copy()
    big[5, 7] = V  # one past the vocabulary
    cases.append(("id >= input_dim", dict(d, x_train=big),
                  ["training example 5 has token id %d at position 7" % V, "input_dim %d" % V,
                   "'embed'"]))
    neg = d["x_test"].astype(np.int64)
    neg[2, 3] = -1
    cases.append(("negative id", dict(d, x_test=neg),
                  ["x_test", "example 2 has token id -1 at position 3"]))
    cases.append(("float features", dict(d, x_train=d["x_train"].astype(np.float32),
                                         x_test=d["x_test"].astype(np.float32)),
                  ["float32 values", "'embed' (Embedding) reads integer token ids"]))
    for i, (what, arrays, subs) in enumerate(cases):
        path = os.path.join(work, "bad%d.npz" % i)
        np.savez(path, **arrays)
        p = run([mw, "train", "--model", r["path"], "--data", path, "--epochs", "1",
                 "--summary-dir", "", "--checkpoint-dir", os.path.join(work, "bad%d-ck" % i)])
        msg = (p.stdout + p.stderr).strip().splitlines()
        last = msg[-1] if msg else ""
        check(p.returncode != 0 and all(s in last for s in subs),
              "refused, %s (exit %d): %s" % (what, p.returncode, last))
    masked = os.path.join(work, "masked.keras")
    build("max", 5, mask_zero=True).save(masked)
    p = run([mw, "train", "--model", masked, "--data", r["data"], "--epochs", "1",
             "--summary-dir", "", "--checkpoint-dir", os.path.join(work, "masked-ck")])
    last = (p.stdout + p.stderr).strip().splitlines()[-1:]
    check(p.returncode != 0 and last and "gets the padding mask of Embedding(mask_zero=True)"
          in last[0] and "GlobalMaxPooling1D" in last[0],
          "refused, a padding mask into GlobalMaxPooling1D (exit %d): %s" % (p.returncode, last))


def main():
    mw, work = sys.argv[1], sys.argv[2]
    # the AVX2 pass (deploy/local/test.sh) repeats what the kernels compute: the parity with
    # Keras and the layouts; the exports and the refusals do not depend on the ISA
    isa_pass = "ONEDNN_MAX_CPU_ISA" in os.environ
    table = []
    first = tagger = None
    for name, pool, dtype, seed, mask, ln in [
            ("Embedding, GlobalAveragePooling1D", "avg", np.int32, 11, False, None),
            ("Embedding, GlobalMaxPooling1D (uint16)", "max", np.uint16, 12, False, None),
            ("Embedding, GlobalAveragePooling1D (uint8)", "avg", np.uint8, 13, False, None),
            ("Embedding(mask_zero), GAP1D, padded", "avg", np.int32, 14, True, None),
            ("Embedding, LayerNorm, Dense/position, GAP1D", "avg", np.int32, 15, False, "ln"),
            ("Embedding, Conv1D, pooling 1D x2, GMP1D", "max", np.int32, 16, False, "conv"),
            ("tagger: a label per position (N, T)", "avg", np.int32, 17, False, "tag"),
            ("causal Conv1D tagger", "avg", np.int32, 18, False, "causal"),
            ("Transformer block (MHA, mask_zero), GAP1D", "avg", np.int32, 21, True, "mha"),
            ("causal Transformer block, per position", "avg", np.int32, 22, False, "gpt"),
            ("tagger, padded, ignore_class=%d" % IGNORE, "avg", np.int32, 19, True, "padtag"),
            ("causal block, padded, ignore_class=%d" % IGNORE, "avg", np.int32, 23, True,
             "padgpt")]:
        r = one_case(mw, work, name, pool, dtype, seed, table, mask, ln)
        first = first or (name, r)
        tagger = r if ln == "tag" else tagger
        if (mask or ln) and r is not None:
            prefix = "-".join(t for t in ("mask" if mask else "", ln or "") if t) + "-"
            # the 4-replica layouts test the collectives, not the kernels: not in the AVX2 pass
            layouts(mw, work, name, r, prefix, more=ln in ("gpt", "padgpt") and not isa_pass)
        if ln and r is not None and not isa_pass:  # Conv1D's (k, C, O), LayerNorm's gamma, beta
            export(mw, work, name, r, "ex-" + ln)
    if first[1] is not None:
        layouts(mw, work, *first)
        if not isa_pass:
            export(mw, work, *first)
            refusals(mw, work, first[1], tagger)
    corpus_lm(mw, work, table)
    print_table(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
