"""``digits``: the offline dataset that ships with the app.

The UCI Optical Recognition of Handwritten Digits test set as scikit-learn distributes it
(resources/datasets/digits.csv.gz, see DIGITS_LICENSE.md): 1,797 rows of 64 pixel values
0..16 (an 8x8 image) followed by the label 0..9. There is no official train/test split, so
we hold out a stratified 20 % with a fixed seed; every run and every call sees the same split.
"""
from __future__ import annotations

import gzip
import zlib

import numpy as np

from gui_app.engine.datasets.base import Dataset, DatasetError, make_dataset, stratified_split
from gui_app.identity import resource_path

DIGITS_FILE = ("datasets", "digits.csv.gz")
DIGITS_TEST_FRACTION = 0.2


def load_digits() -> Dataset:
    path = resource_path(*DIGITS_FILE)
    try:
        with gzip.open(path, "rt", encoding="ascii") as f:
            table = np.loadtxt(f, delimiter=",", dtype=np.float64, ndmin=2)
    except FileNotFoundError:
        raise DatasetError(f"{path}: the bundled digits dataset is missing from this installation") from None
    except (OSError, EOFError, zlib.error, ValueError) as exc:
        raise DatasetError(f"{path}: the bundled digits file is damaged ({exc})") from None
    if table.shape[1] != 65 or len(table) == 0:
        raise DatasetError(f"{path}: expected rows of 64 pixels and a label; got shape {table.shape}")
    pixels, labels = table[:, :64], table[:, 64]
    if pixels.min() < 0 or pixels.max() > 16:
        raise DatasetError(f"{path}: pixel values must be 0..16")
    images = np.rint(pixels * (255.0 / 16.0)).astype(np.uint8).reshape(-1, 8, 8, 1)
    train, test = stratified_split(labels.astype(np.int64), DIGITS_TEST_FRACTION)
    return make_dataset("digits", str(path), images[train], labels[train], images[test], labels[test],
                        class_names=[str(i) for i in range(10)])
