"""Fashion-MNIST written out three ways, for the image-folder and TFRecord training tests:

  OUT/folder/{train,test}/CLASS/NNNNN.png   PNG files (TensorFlow's encoder), class folders
                                            c0..c9, files named by their index in the set
  OUT/shards/fmnist-{train,test}.tfrecord-0000I-of-00008
                                            the same PNG bytes as tf.train.Example records
                                            (TFDS's features: image, label), 8 shards a split,
                                            written by tf.io.TFRecordWriter
  OUT/data.npz                              x_train, y_train, x_test, y_test as uint8 in the
                                            folder's order (classes in order, files sorted by
                                            name), which is the order mwtrain reads both in

usage: folder_data.py OUT NTRAIN NTEST   (run with TensorFlow's Python)"""
import gzip
import os
import sys

import numpy as np
import tensorflow as tf

SRC = "/usr/share/datasets/fashion-mnist"


def idx(name, offset):
    with gzip.open(os.path.join(SRC, name)) as f:
        return np.frombuffer(f.read(), np.uint8, offset=offset)


def split(x, y, n):
    """The first n examples, reordered as the folder lists them: by class, then by index."""
    x, y = x[:n], y[:n]
    order = np.lexsort((np.arange(n), y))
    return x[order], y[order], order


def write(out, name, x, y, ids):
    pngs = []
    for img, label, i in zip(x, y, ids):
        d = os.path.join(out, "folder", name, "c%d" % label)
        os.makedirs(d, exist_ok=True)
        png = tf.io.encode_png(img[:, :, None]).numpy()
        with open(os.path.join(d, "%05d.png" % i), "wb") as f:
            f.write(png)
        pngs.append(png)
    os.makedirs(os.path.join(out, "shards"), exist_ok=True)
    per = (len(pngs) + 7) // 8
    for s in range(8):
        path = os.path.join(out, "shards", "fmnist-%s.tfrecord-%05d-of-00008" % (name, s))
        with tf.io.TFRecordWriter(path) as w:
            for png, label in zip(pngs[s * per:(s + 1) * per], y[s * per:(s + 1) * per]):
                ex = tf.train.Example(features=tf.train.Features(feature={
                    "image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[png])),
                    "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[int(label)])),
                }))
                w.write(ex.SerializeToString())


def main():
    out, ntrain, ntest = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    xtr = idx("train-images-idx3-ubyte.gz", 16).reshape(-1, 28, 28)
    ytr = idx("train-labels-idx1-ubyte.gz", 8)
    xte = idx("t10k-images-idx3-ubyte.gz", 16).reshape(-1, 28, 28)
    yte = idx("t10k-labels-idx1-ubyte.gz", 8)
    xtr, ytr, itr = split(xtr, ytr, ntrain)
    xte, yte, ite = split(xte, yte, ntest)
    write(out, "train", xtr, ytr, itr)
    write(out, "test", xte, yte, ite)
    np.savez(os.path.join(out, "data.npz"), x_train=xtr, y_train=ytr, x_test=xte, y_test=yte)


if __name__ == "__main__":
    main()
