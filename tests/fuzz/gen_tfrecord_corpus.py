#!/usr/bin/env python3
"""Write the seed corpus of tests/fuzz/fuzz_tfrecord.c (tests/fuzz/corpus/tfrecord/): each
file is the target's mode byte (0 any compression, 1 GZIP, 2 ZLIB, 3 a shard name) and then
a small shard or name: Examples with the TFDS and models-garden features and float, int64 and
bytes lists (some empty), the same shard GZIP- and ZLIB-compressed, an empty shard, one
record, a record that is not an Example, a broken CRC, and sharded file names.

    python3 tests/fuzz/gen_tfrecord_corpus.py [CORPUS_DIR]
"""
import gzip
import os
import sys
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tfrecord"))
import tfrecord_io as tio  # noqa: E402

EXAMPLES = [
    {"image/encoded": ("bytes", [b"\x89PNG\r\n\x1a\n"]), "image/class/label": ("int64", [3])},
    {"image": ("bytes", [b"\xff\xd8\xff"]), "label": ("int64", [7])},
    {"floats": ("float", [0.5, -1.0, float("inf")]), "ints": ("int64", [-1, 2**63 - 1]),
     "multi": ("bytes", [b"", b"ab"]), "empty": ("int64", [])},
]


def main(out):
    os.makedirs(out, exist_ok=True)
    shard = b"".join(tio.record(tio.example(e)) for e in EXAMPLES)
    seeds = {
        "plain": b"\x00" + shard,
        "gzip": b"\x00" + gzip.compress(shard, mtime=0),
        "gzip_forced": b"\x01" + gzip.compress(shard, mtime=0),
        "zlib": b"\x02" + zlib.compress(shard),
        "empty": b"\x00",
        "one_record": b"\x00" + tio.record(tio.example(EXAMPLES[1])),
        "not_example": b"\x00" + tio.record(b"\x0a\xff\xff\xff\xff\x0f"),
        "bad_crc": b"\x00" + shard[:-1] + bytes([shard[-1] ^ 1]),
        "name_tfds": b"\x03mnist-train.tfrecord-00003-of-00016",
        "name_garden": b"\x03validation-00127-of-00128",
    }
    for name, data in seeds.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "corpus", "tfrecord"))
