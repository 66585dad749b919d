"""A GPT and its data for tests/bench/gpu_first_run.sh, in plain Python (a GPU host may have
neither Keras nor numpy): the model as the Keras JSON mwtrain reads (docs/keras.md), a Sequential of
Embedding(vocab, width) -> blocks x KerasHub TransformerDecoder(ff, heads, dropout,
activation; post-norm, causal) -> Dense(vocab) on each position, the same matrix work as
tests/bench/peer_torch_lm.py's gpt (which has ReLU) and peer_keras_lm.py's GPT; and random
token windows with their next tokens as x_train / y_train (and 64 test windows), .npy files of
int32.

  gpt_data.py OUTDIR [--blocks 2] [--width 64] [--heads 4] [--ff 128] [--context 32]
              [--vocab 64] [--examples 512] [--dropout 0] [--activation gelu]

writes OUTDIR/gpt.json and OUTDIR/tokens/{x,y}_{train,test}.npy."""
import argparse
import json
import os
import random
import struct


def layer(cls, name, registered=None, **config):
    config = dict(dict(name=name, trainable=True, dtype="float32"), **config)
    return {"module": "keras.layers", "class_name": cls, "config": config,
            "registered_name": registered}


def save_npy(path, rows):
    """rows (a list of equal-length lists of ints, or of ints) as a 2-D (1-D) little-endian
    int32 .npy."""
    flat = not isinstance(rows[0], list)
    shape = "(%d,)" % len(rows) if flat else "(%d, %d)" % (len(rows), len(rows[0]))
    header = "{'descr': '<i4', 'fortran_order': False, 'shape': %s, }" % shape
    header += " " * (63 - (10 + len(header)) % 64) + "\n"  # the data 64-byte aligned
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
        for r in [rows] if flat else rows:
            f.write(struct.pack("<%di" % len(r), *r))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    for k, v in [("blocks", 2), ("width", 64), ("heads", 4), ("ff", 128), ("context", 32),
                 ("vocab", 64), ("examples", 512)]:
        p.add_argument("--" + k, type=int, default=v)
    p.add_argument("--dropout", type=float, default=0.0)
    p.add_argument("--activation", default="gelu")
    p.add_argument("--classes", type=int, default=0)
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    glorot = {"module": "keras.initializers", "class_name": "GlorotUniform",
              "config": {"seed": None}, "registered_name": None}
    zeros = {"module": "keras.initializers", "class_name": "Zeros", "config": {},
             "registered_name": None}
    layers = [layer("InputLayer", "ids", batch_shape=[None, a.context], dtype="int32"),
              layer("Embedding", "embed", input_dim=a.vocab, output_dim=a.width,
                    embeddings_initializer={"module": "keras.initializers",
                                            "class_name": "RandomUniform",
                                            "config": {"seed": None, "minval": -0.05,
                                                       "maxval": 0.05},
                                            "registered_name": None},
                    mask_zero=False)]
    for b in range(a.blocks):
        layers.append(layer("TransformerDecoder", "dec%d" % b, "keras_hub>TransformerDecoder",
                            intermediate_dim=a.ff, num_heads=a.heads, dropout=a.dropout,
                            activation=a.activation, layer_norm_epsilon=1e-5,
                            kernel_initializer=glorot, bias_initializer=zeros,
                            normalize_first=False))
        layers[-1]["module"] = "keras_hub.src.layers.modeling.transformer_decoder"
    layers.append(layer("Dense", "next", units=a.vocab, activation="linear", use_bias=True,
                        kernel_initializer=glorot, bias_initializer=zeros))
    model = {"module": "keras", "class_name": "Sequential",
             "config": {"name": "gpt", "trainable": True, "layers": layers},
             "registered_name": None}
    with open(os.path.join(a.out, "gpt.json"), "w") as f:
        json.dump(model, f)
    g = random.Random(1234)
    seq = [[g.randrange(a.vocab) for _ in range(a.context + 1)] for _ in range(a.examples + 64)]
    d = os.path.join(a.out, "tokens")
    os.makedirs(d, exist_ok=True)
    for part, rows in (("test", seq[:64]), ("train", seq[64:])):
        save_npy(os.path.join(d, "x_%s.npy" % part), [r[:-1] for r in rows])
        save_npy(os.path.join(d, "y_%s.npy" % part), [r[1:] for r in rows])
    if a.classes > 0:
        d = os.path.join(a.out, "ids")
        os.makedirs(d, exist_ok=True)
        for part, rows in (("test", seq[:64]), ("train", seq[64:])):
            save_npy(os.path.join(d, "x_%s.npy" % part), [r[:-1] for r in rows])
            save_npy(os.path.join(d, "y_%s.npy" % part), [r[0] % a.classes for r in rows])


if __name__ == "__main__":
    main()
