"""An image folder of class folders cut by --validation-split F --validation-seed N against
Keras' image_dataset_from_directory(validation_split=F, subset="both", seed=N): the same files
on each side, in the same order (Keras keeps them in dataset.file_paths), with the same labels
and class names; for several seeds and fractions, and a control (another seed differs).

usage: check_split.py DATA_LOAD TREE   (TREE: class folders of images, no subfolders;
TensorFlow's Python)"""
import os
import subprocess
import sys

import keras

ok = True


def mine(data_load, tree, split, seed, which):
    out = subprocess.run([data_load, "--validation-split", str(split), "--validation-seed",
                          str(seed), "--split", which, "--list", tree],
                         capture_output=True, text=True, check=True).stdout.split("\n")
    rows = [line.rsplit(" ", 1) for line in out if line]
    return [os.path.normpath(p) for p, _ in rows], [int(y) for _, y in rows]


def keras_side(ds):
    """The files in the order Keras cut them (its shuffled list, before the dataset's own
    per-iteration shuffle) and their labels: the class folder's place among class_names."""
    paths = [os.path.normpath(p) for p in ds.file_paths]
    return paths, [ds.class_names.index(os.path.basename(os.path.dirname(p))) for p in paths]


def main():
    global ok
    data_load, tree = sys.argv[1:3]
    for split, seed in ((0.2, 1337), (0.5, 0), (0.1, 4294967295), (0.33, 7)):
        tr, va = keras.utils.image_dataset_from_directory(
            tree, validation_split=split, subset="both", seed=seed, image_size=(8, 8),
            batch_size=64)
        for name, ds, which in (("training", tr, "train"), ("validation", va, "test")):
            kp, ky = keras_side(ds)
            mp, my = mine(data_load, tree, split, seed, which)
            same = kp == mp and ky == my
            print(f"split {split} seed {seed} {name}: {len(mp)} files (Keras {len(kp)}): "
                  f"{'same files, order and labels' if same else 'DIFFERENT'}")
            ok &= same
    mp, _ = mine(data_load, tree, 0.2, 1338, "test")
    kp, _ = keras_side(keras.utils.image_dataset_from_directory(
        tree, validation_split=0.2, subset="validation", seed=1337, image_size=(8, 8)))
    print(f"control: seed 1338 against Keras' 1337: {'same (BAD)' if mp == kp else 'differs'}")
    ok &= mp != kp
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
