"""Writes TFRecord shards with TensorFlow (tf.io.TFRecordWriter, plain, GZIP and ZLIB) and what
TensorFlow itself reads back from them, for tests/tfrecord/test_tfrecord.py's agreement test.
Run with the TensorFlow venv's python (tests/bench/tf_venv.sh):

    tf_write.py OUTDIR      -> OUTDIR/<shards>, OUTDIR/expected.json

expected.json: {shard path relative to OUTDIR: {"records": [[offset, {key: [kind, values]}]]}},
read back with tf.data.TFRecordDataset and tf.train.Example.FromString (not from the values
put in), bytes as hex, floats as the hex of their 32 bits, int64 as integers; offset is where
the record's header starts (in the uncompressed stream of a compressed shard)."""
import json
import os
import sys

import numpy as np
import tensorflow as tf


def b_(values):
    return tf.train.Feature(bytes_list=tf.train.BytesList(value=values))


def i_(values):
    return tf.train.Feature(int64_list=tf.train.Int64List(value=values))


def f_(values):
    return tf.train.Feature(float_list=tf.train.FloatList(value=values))


def png(rng, i):
    img = rng.integers(0, 256, (3 + i % 4, 2 + i % 3, 3), dtype=np.uint8)
    return tf.io.encode_png(img).numpy()


def garden(rng, i):
    """The TF models garden's image classification features."""
    return {"image/encoded": b_([png(rng, i)]), "image/class/label": i_([i % 10]),
            "image/format": b_([b"png"]), "image/height": i_([3 + i % 4])}


def tfds(rng, i):
    """TFDS's image classification features."""
    return {"image": b_([png(rng, i)]), "label": i_([i % 7])}


def lists(rng, i):
    """Float and int64 lists with the edge values, several bytes values, empty lists."""
    floats = [0.0, -0.0, 1.5, -2.25, 1e-40, 3.4028235e38, float("inf"), float("-inf"),
              float("nan")] + [float(x) for x in rng.standard_normal(i % 5)]
    ints = [0, -1, 1, 2**63 - 1, -2**63, 2**31, -(2**31) - 1] + [int(x) for x in
                                                                 rng.integers(-1000, 1000, i % 4)]
    return {"floats": f_(floats), "ints": i_(ints), "multi": b_([b"", b"a\x00b", bytes(range(256))]),
            "empty_f": f_([]), "empty_i": i_([]), "empty_b": b_([]), "label": i_([i])}


def write(path, make, n, rng, compression=None):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    opts = tf.io.TFRecordOptions(compression_type=compression) if compression else None
    with tf.io.TFRecordWriter(path, opts) as w:
        for i in range(n):
            w.write(tf.train.Example(features=tf.train.Features(feature=make(rng, i)))
                    .SerializeToString())


def feature_json(f):
    kind = f.WhichOneof("kind")
    if kind == "bytes_list":
        return ["bytes", [v.hex() for v in f.bytes_list.value]]
    if kind == "float_list":
        bits = np.array(list(f.float_list.value), dtype=np.float32).view(np.uint32)
        return ["float", ["%08x" % b for b in bits]]
    if kind == "int64_list":
        return ["int64", [int(v) for v in f.int64_list.value]]
    return ["none", []]


def read_back(path, compression):
    out, off = [], 0
    for raw in tf.data.TFRecordDataset([path], compression_type=compression or ""):
        data = raw.numpy()
        ex = tf.train.Example.FromString(data)
        out.append([off, {k: feature_json(v) for k, v in ex.features.feature.items()}])
        off += len(data) + 16
    return out


def main(outdir):
    rng = np.random.default_rng(7)
    shards = []  # (relative path, make, records, compression)
    for k, n in enumerate((5, 4, 3)):
        shards.append((f"tfds/toy-train.tfrecord-{k:05d}-of-00003", tfds, n, None))
    shards.append(("tfds/toy-test.tfrecord-00000-of-00001", tfds, 2, None))
    shards += [(f"garden/train-{k:05d}-of-00002", garden, 6, None) for k in range(2)]
    shards += [(f"gzip/toy-train.tfrecord-{k:05d}-of-00002", lists, 4, "GZIP") for k in range(2)]
    shards.append(("zlib/lists.tfrecord", lists, 3, "ZLIB"))
    shards.append(("plain/lists.tfrecord", lists, 6, None))
    shards.append(("plain/nothing.tfrecord", lists, 0, None))
    expected = {}
    for rel, make, n, comp in shards:
        path = os.path.join(outdir, rel)
        write(path, make, n, rng, comp)
        expected[rel] = {"records": read_back(path, comp)}
    with open(os.path.join(outdir, "expected.json"), "w") as f:
        json.dump(expected, f)


if __name__ == "__main__":
    main(sys.argv[1])
