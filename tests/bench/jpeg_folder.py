"""The same images as a JPEG folder and as a decoded .npy set, for folder_speed.sh:

  OUT/folder/{train,test}/cK/NNNNN.jpg   Fashion-MNIST images resized to SIZE x SIZE, as RGB,
                                         with a little noise (natural-image-like entropy),
                                         JPEG quality 90 (TensorFlow's encoder)
  OUT/npy/{x,y}_{train,test}.npy         those JPEG files decoded again (TensorFlow's decoder),
                                         uint8, in the folder's order

usage: jpeg_folder.py OUT SIZE NTRAIN NTEST   (run with TensorFlow's Python)"""
import gzip
import os
import sys

import numpy as np
import tensorflow as tf

SRC = "/usr/share/datasets/fashion-mnist"


def idx(name, offset):
    with gzip.open(os.path.join(SRC, name)) as f:
        return np.frombuffer(f.read(), np.uint8, offset=offset)


def split(out, name, x, y, size, rng):
    order = np.lexsort((np.arange(len(y)), y))  # the folder's order: class, then file name
    xs, ys = [], []
    for i in order:
        img = tf.image.resize(x[i][:, :, None].astype(np.float32), (size, size)).numpy()
        img = np.repeat(img, 3, axis=2) + rng.normal(0, 6, (size, size, 3))
        img = np.clip(img, 0, 255).astype(np.uint8)
        jpg = tf.io.encode_jpeg(img, quality=90).numpy()
        d = os.path.join(out, "folder", name, "c%d" % y[i])
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "%05d.jpg" % i), "wb") as f:
            f.write(jpg)
        xs.append(tf.io.decode_jpeg(jpg, channels=3).numpy())
        ys.append(y[i])
    os.makedirs(os.path.join(out, "npy"), exist_ok=True)
    np.save(os.path.join(out, "npy", "x_%s.npy" % name), np.stack(xs))
    np.save(os.path.join(out, "npy", "y_%s.npy" % name), np.array(ys, np.uint8))


def main():
    out, size, ntrain, ntest = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    rng = np.random.default_rng(0)
    x = idx("train-images-idx3-ubyte.gz", 16).reshape(-1, 28, 28)
    y = idx("train-labels-idx1-ubyte.gz", 8)
    split(out, "train", x[:ntrain], y[:ntrain], size, rng)
    split(out, "test", x[ntrain:ntrain + ntest], y[ntrain:ntrain + ntest], size, rng)


if __name__ == "__main__":
    main()
