#!/usr/bin/env python3
"""Write the seed corpus of the checkpoint fuzz target (tests/fuzz/corpus/checkpoint/).

An encoder of docs/checkpoint.md written apart from worker/checkpoint.c, so the seeds also check
the document. The seeds are small (10 parameters) so that libFuzzer's mutations land in every
section: valid files of each optimizer shape, one with stored (level 0) zlib blocks whose raw
bytes mutations can reach directly, and a few near misses (bad CRC, trailing bytes, truncated).

    python3 tests/fuzz/gen_checkpoint_corpus.py [OUTDIR]
"""
import os
import struct
import sys
import zlib

MAGIC = b"MWCKPT\x00\x01"


def meta(opt, nparams, arrays, model_nbytes, opt_step=5, epoch=1, step_in_epoch=2,
         global_step=7, seed=42, global_batch=64, lr=1e-3):
    nslots = nparams if arrays else 0
    return struct.pack("<16sQQIIqqqqQqdQ", opt.encode(), nparams, nslots, arrays, 0, opt_step,
                       epoch, step_in_epoch, global_step, seed, global_batch, lr, model_nbytes)


def section(tag, raw, level=6):
    comp = zlib.compress(raw, level)
    return struct.pack("<8sQQI", tag.encode(), len(comp), len(raw), zlib.crc32(raw)) + comp


def ckpt(opt, nparams, arrays, model=b'{"class_name": "Sequential"}', level=6):
    floats = lambda k: struct.pack("<%df" % nparams, *[(i + k) * 0.25 for i in range(nparams)])
    secs = [("meta", meta(opt, nparams, arrays, len(model))), ("model", model),
            ("params", floats(0))]
    secs += [("slot%d" % (i + 1), floats(i + 1)) for i in range(arrays)]
    body = b"".join(section(t, r, level) for t, r in secs)
    return MAGIC + struct.pack("<II", 1, len(secs)) + body


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "corpus",
                                                             "checkpoint")
    os.makedirs(out, exist_ok=True)
    good = ckpt("adam", 10, 2)
    seeds = {
        "adam_10": good,
        "sgd_momentum_10": ckpt("sgd", 10, 1),
        "sgd_plain_empty_model": ckpt("sgd", 10, 0, model=b""),
        "adam_no_params": ckpt("adam", 0, 2),
        "adam_stored_blocks": ckpt("adam", 10, 2, level=0),
        "bad_crc": good[:16 + 24] + bytes([good[16 + 24] ^ 1]) + good[16 + 25:],
        "trailing": good + b"\x00\x00\x00",
        "truncated": good[:len(good) // 2],
    }
    for name, data in seeds.items():
        with open(os.path.join(out, name + ".ckpt"), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
