"""The GPT benchmark model (a causal language model), in Keras 3, for tests/bench/bench_lm.sh:
a GPT of core layers (KerasHub's TransformerDecoder without cross-attention is the same
block): Embedding(vocab, width) -> blocks x [MultiHeadAttention(heads, width / heads, causal)
-> Add -> LayerNormalization(1e-5) -> Dense(ff, relu) -> Dense(width) -> Add ->
LayerNormalization(1e-5)] -> Dense(vocab) on each position; sparse cross-entropy from logits,
Adam(1e-3). The defaults: 4 blocks of width 128, 4 heads, ff 512, context 128,
a byte vocabulary (875,264 parameters with KerasHub's position embedding; 858,880 here without
it, the same matrix work).

  peer_keras_lm.py save PATH [--blocks 4] [--width 128] [--heads 4] [--ff 512]
                             [--context 128] [--vocab 256] [--hub]
  peer_keras_lm.py data PATH --examples N [--context 128] [--vocab 256]
  peer_keras_lm.py time PATH DATA --batch 32 --steps 40 [--warmup 5]

`save --hub` writes the KerasHub GPT benchmark model instead: KerasHub's TokenAndPositionEmbedding
and TransformerDecoder blocks (the same matrix work, 875,264 parameters). `time` trains the saved
model with fit() on the data's windows (KERAS_BACKEND picks the backend) and prints, last,
`peer_keras_lm tokens_per_sec=<median over windows of 5 steps>`. `data` writes random byte windows
(N, context) and their next bytes as x_train / y_train (and a small test set) for both programs.

`save --llama` writes the Llama benchmark model of tests/bench/bench_llama.sh instead: KerasHub's
LlamaCausalLM (LlamaBackbone: token embedding, blocks x [RMSNorm -> grouped-query attention with
rotary positions (--heads query heads, --kv-heads key-value heads) -> residual -> RMSNorm ->
SwiGLU(--ff) -> residual], RMSNorm, an untied Dense(vocab) head), untrained, no preprocessor,
compiled with Adam(1e-3); `data --named` writes its inputs the way KerasHub names them:
x_train.token_ids and x_train.padding_mask (all 1: full windows). `time` feeds such a model
its named inputs and recompiles it with Adam(1e-3) (KerasHub does not restore a task's compile).

  peer_keras_lm.py save PATH --llama --blocks 4 --width 256 --heads 8 --kv-heads 2 --ff 768
  peer_keras_lm.py data PATH --named --examples N --context 256"""
import argparse
import os
import statistics
import sys
import time
import warnings

warnings.filterwarnings("ignore")


def build_hub(a):
    """The KerasHub GPT benchmark model: KerasHub's TokenAndPositionEmbedding -> blocks x
    TransformerDecoder(ff, heads) -> Dense(vocab) (875,264 parameters at the defaults)."""
    import keras
    import keras_hub
    keras.utils.set_random_seed(1)
    inp = keras.Input((a.context,), dtype="int32", name="ids")
    x = keras_hub.layers.TokenAndPositionEmbedding(a.vocab, a.context, a.width, name="embed")(inp)
    for b in range(a.blocks):
        x = keras_hub.layers.TransformerDecoder(a.ff, a.heads, name="dec%d" % b)(x)
    m = keras.Model(inp, keras.layers.Dense(a.vocab, name="next")(x), name="gpt_hub")
    m.compile(optimizer=keras.optimizers.Adam(1e-3),
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
              metrics=["accuracy"])
    return m


def build_llama(a):
    """The Llama benchmark model: KerasHub's LlamaCausalLM, untrained, without a preprocessor."""
    import keras
    import keras_hub
    keras.utils.set_random_seed(1)
    bb = keras_hub.models.LlamaBackbone(vocabulary_size=a.vocab, num_layers=a.blocks,
                                        num_query_heads=a.heads, num_key_value_heads=a.kv_heads,
                                        hidden_dim=a.width, intermediate_dim=a.ff)
    m = keras_hub.models.LlamaCausalLM(backbone=bb, preprocessor=None)
    m.compile(optimizer=keras.optimizers.Adam(1e-3))
    return m


def build(a):
    import keras
    if a.hub:
        return build_hub(a)
    if a.llama:
        return build_llama(a)
    L = keras.layers
    keras.utils.set_random_seed(1)
    inp = keras.Input((a.context,), dtype="int32", name="ids")
    x = L.Embedding(a.vocab, a.width, name="embed")(inp)
    for b in range(a.blocks):
        att = L.MultiHeadAttention(a.heads, a.width // a.heads, name="att%d" % b)(
            x, x, use_causal_mask=True)
        x = L.LayerNormalization(epsilon=1e-5, name="ln%da" % b)(L.Add(name="res%da" % b)([x, att]))
        f = L.Dense(a.ff, activation="relu", name="ff%da" % b)(x)
        f = L.Dense(a.width, name="ff%db" % b)(f)
        x = L.LayerNormalization(epsilon=1e-5, name="ln%db" % b)(L.Add(name="res%db" % b)([x, f]))
    m = keras.Model(inp, L.Dense(a.vocab, name="next")(x), name="gpt")
    m.compile(optimizer=keras.optimizers.Adam(1e-3),
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
              metrics=["accuracy"])
    return m


def main():
    p = argparse.ArgumentParser()
    p.add_argument("cmd", choices=["save", "data", "time"])
    p.add_argument("path")
    p.add_argument("data", nargs="?")
    for k, v in [("blocks", 4), ("width", 128), ("heads", 4), ("ff", 512), ("context", 128),
                 ("vocab", 256), ("batch", 32), ("steps", 40), ("warmup", 5),
                 ("examples", 1024), ("kv-heads", 2)]:
        p.add_argument("--" + k, type=int, default=v)
    p.add_argument("--hub", action="store_true", help="save KerasHub's blocks instead")
    p.add_argument("--llama", action="store_true", help="save KerasHub's LlamaCausalLM instead")
    p.add_argument("--named", action="store_true",
                   help="data: KerasHub's named inputs (token_ids, padding_mask)")
    a = p.parse_args()
    import numpy as np
    if a.cmd == "save":
        m = build(a)
        m.save(a.path)
        print("saved %s: %d parameters" % (a.path, m.count_params()))
        return 0
    if a.cmd == "data":
        r = np.random.default_rng(3)
        s = r.integers(0, a.vocab, (a.examples + 64, a.context + 1)).astype(np.uint8)
        arrays = {}
        for split, w in (("train", s[:a.examples]), ("test", s[a.examples:])):
            if a.named:
                arrays["x_%s.token_ids" % split] = w[:, :-1].astype(np.int32)
                arrays["x_%s.padding_mask" % split] = np.ones_like(w[:, :-1], np.int32)
            else:
                arrays["x_" + split] = w[:, :-1]
            arrays["y_" + split] = w[:, 1:].astype(np.int32)
        np.savez(a.path, **arrays)
        return 0
    import keras
    m = keras.models.load_model(a.path)
    d = np.load(a.data)
    names = [k[len("x_train."):] for k in d.files if k.startswith("x_train.")]
    if names:  # a KerasHub task: its named inputs, and the compile KerasHub does not restore
        m.compile(optimizer=keras.optimizers.Adam(1e-3))
    x, y = d["x_train"].astype(np.int32) if not names else None, d["y_train"]
    times = []

    class Clock(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            times.append(time.perf_counter())

    need = (a.warmup + a.steps) * a.batch
    reps = -(-need // len(y))

    def cycle(v):
        return np.concatenate([v] * reps)[:need]
    xs = {n: cycle(d["x_train." + n]) for n in names} if names else cycle(x)
    # keras.Model.fit: KerasHub's own fit wants TensorFlow's data pipeline; it only batches here
    keras.Model.fit(m, xs, cycle(y), batch_size=a.batch, epochs=1, shuffle=False, verbose=0,
                    callbacks=[Clock()])
    t = times[a.warmup - 1:]
    per = [(t[i + 5] - t[i]) / 5 for i in range(0, len(t) - 5, 5)]
    tps = a.batch * y.shape[1] / statistics.median(per)
    print("peer_keras_lm tokens_per_sec=%.0f backend=%s batch=%d steps=%d" %
          (tps, keras.backend.backend(), a.batch, a.steps))
    return 0


if __name__ == "__main__":
    sys.exit(main())
