"""Small data sets shipped with fnx, for the demo, the notebooks and the examples.

``load_digits()``: the optical recognition of handwritten digits data (UCI ML
repository, E. Alpaydin and C. Kaynak, 1998; licensed CC BY 4.0), as scikit-learn
ships it: 1,797 grey 8x8 images with pixel values 0..16 and their labels 0..9.
The file is NumPy's ``.npz`` of two uint8 arrays, read with ``allow_pickle=False``.
"""
from __future__ import annotations

import os

import numpy as np

_HERE = os.path.dirname(os.path.abspath(__file__))


def load_digits():
    """``(images uint8[1797, 8, 8], labels uint8[1797])``, as NumPy arrays."""
    with np.load(os.path.join(_HERE, "digits.npz"), allow_pickle=False) as f:
        return f["images"], f["labels"]


def digits_split(test_fraction=0.25, seed=0):
    """The fixed train/test split of the digits: ``((x_train, y_train), (x_test, y_test))``
    with images as float32 ``[N, 1, 8, 8]`` scaled to [0, 1] and int32 labels; a
    stratified shuffle by ``seed`` (the same split on every machine)."""
    images, labels = load_digits()
    rng = np.random.default_rng(seed)
    test = np.zeros(len(labels), bool)
    for c in range(10):
        idx = np.flatnonzero(labels == c)
        test[rng.permutation(idx)[:int(round(len(idx) * test_fraction))]] = True
    x = (images.astype(np.float32) / 16.0)[:, None]
    y = labels.astype(np.int32)
    return (x[~test], y[~test]), (x[test], y[test])
