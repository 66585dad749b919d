"""scikit-learn's bundled data sets as Keras-style .npz files for mwtrain.

Real data with no download: load_breast_cancer, load_diabetes and load_digits read the copies
that ship inside scikit-learn. Each becomes OUTDIR/<name>.npz holding x_train, y_train,
x_test, y_test (np.savez, uncompressed), the four arrays mwtrain's --data reads.

The split is fixed: sklearn.model_selection.train_test_split(test_size=0.25, random_state=0),
stratified by class for the two classifiers (not for the regression). Everything that is
learnt from the data (means, standard deviations) comes from the TRAINING part only and is
applied to both parts, so nothing of the test set leaks into training.

  breast_cancer.npz  569 examples -> 426 train, 143 test; x float32 (N, 30), each feature
                     standardized (train mean and std); y float32 (N,) 0/1 (1 = benign):
                     a binary target of BinaryCrossentropy with a Dense(1, sigmoid) output.
  diabetes.npz       442 examples -> 331 train, 111 test; x float32 (N, 10) standardized
                     (sklearn's copy is already scaled, to unit norm; this makes it unit
                     variance); y float32 (N,): the disease progression standardized with the
                     train mean and std (151.9 and 79.1 on this split), so MSE and MAE are
                     O(1) in units of the train std; multiply by it for sklearn's units.
  digits.npz         1797 examples -> 1347 train, 450 test; x float32 (N, 8, 8, 1) images,
                     the 0..16 pixel counts divided by 16 (into [0, 1]; not standardized:
                     border pixels are constant 0 in training, and 4-D float32 arrays are
                     what mwtrain reads as images); y float32 (N, 10) one-hot, the targets
                     of CategoricalCrossentropy (e.g. with label_smoothing=0.1).

usage: python sklearn_npz.py OUTDIR   (needs numpy and scikit-learn)"""
import os
import sys

import numpy as np
from sklearn import datasets
from sklearn.model_selection import train_test_split

TEST_SIZE, SPLIT_SEED = 0.25, 0


def split(x, y, stratify):
    return train_test_split(x, y, test_size=TEST_SIZE, random_state=SPLIT_SEED,
                            stratify=y if stratify else None)


def standardize(train, test):
    """(train, test) scaled by the train part's mean and std per column, as float32."""
    mean, std = train.mean(0), train.std(0)
    std = np.where(std > 0, std, 1.0)
    return ((train - mean) / std).astype(np.float32), ((test - mean) / std).astype(np.float32)


def breast_cancer():
    d = datasets.load_breast_cancer()
    xtr, xte, ytr, yte = split(d.data, d.target, True)
    xtr, xte = standardize(xtr, xte)
    return xtr, ytr.astype(np.float32), xte, yte.astype(np.float32)


def diabetes():
    d = datasets.load_diabetes()
    xtr, xte, ytr, yte = split(d.data, d.target, False)
    xtr, xte = standardize(xtr, xte)
    ytr, yte = standardize(ytr[:, None], yte[:, None])
    return xtr, ytr[:, 0], xte, yte[:, 0]


def digits():
    d = datasets.load_digits()
    xtr, xte, ytr, yte = split(d.images, d.target, True)
    eye = np.eye(10, dtype=np.float32)
    img = lambda a: (a / 16.0).astype(np.float32)[..., None]  # noqa: E731  (N, 8, 8, 1)
    return img(xtr), eye[ytr], img(xte), eye[yte]


SETS = {"breast_cancer": breast_cancer, "diabetes": diabetes, "digits": digits}


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: sklearn_npz.py OUTDIR")
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for name, make in SETS.items():
        xtr, ytr, xte, yte = make()
        path = os.path.join(out, name + ".npz")
        np.savez(path, x_train=xtr, y_train=ytr, x_test=xte, y_test=yte)
        print("%s: x_train %s y_train %s x_test %s y_test %s"
              % (path, xtr.shape, ytr.shape, xte.shape, yte.shape))


if __name__ == "__main__":
    main()
