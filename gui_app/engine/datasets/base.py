"""What every dataset reader returns, and the checks they all share.

Readers hand raw arrays to :func:`make_dataset`, which turns images into NHWC ``uint8``
and labels into ``int64`` class indices, and rejects anything that would only fail later
inside a ``tf.function`` (mismatched lengths, labels out of range, images of another rank)
with a one-line :class:`DatasetError` that names the file.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

ProgressCallback = Callable[[dict], None]  # hears a reader's reports: stage, what, done, total

# The held-out test split of digits and of image folders without a test folder must not move
# with the training seed: runs with different seeds are compared on the same test images.
SPLIT_SEED = 20240601
# A label of 10**9 in a file without class names would otherwise make a billion-way classifier.
MAX_CLASSES = 100_000


class DatasetError(ValueError):
    """A dataset cannot be read; the one-line message names the file and the problem."""


@dataclass
class Dataset:
    name: str
    x_train: np.ndarray  # (N, H, W, C) uint8, 0..255
    y_train: np.ndarray  # (N,) int64 in [0, num_classes)
    x_test: np.ndarray
    y_test: np.ndarray
    class_names: list[str]
    warnings: list[str] = field(default_factory=list)

    @property
    def input_shape(self) -> tuple[int, int, int]:
        h, w, c = self.x_train.shape[1:]
        return int(h), int(w), int(c)

    @property
    def num_classes(self) -> int:
        return len(self.class_names)

    def summary(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "class_names": list(self.class_names),
            "input_shape": list(self.input_shape),
            "train_examples": int(len(self.y_train)),
            "test_examples": int(len(self.y_test)),
            "class_counts": np.bincount(self.y_train, minlength=self.num_classes).tolist(),
        }


def require_path(path: str | Path | None, what: str) -> Path:
    """``path`` as a Path that exists, else a DatasetError naming it."""
    if not path:
        raise DatasetError(f"dataset.path: {what} needs a path")
    p = Path(path).expanduser()
    if not p.exists():
        raise DatasetError(f"{p}: no such file or folder")
    return p


def as_images(x: Any, where: str) -> np.ndarray:
    """(N,H,W) or (N,H,W,C) images of any numeric dtype -> (N,H,W,C) uint8.

    Integers must already be 0..255. Floats in [0, 1] are scaled by 255, floats in
    [0, 255] are taken as they are; an all-dark float image set that happens to stay
    below 1.0 is read as [0, 1] -- there is no way to tell the two apart.
    """
    x = np.asarray(x)
    if x.ndim == 3:
        x = x[..., np.newaxis]
    if x.ndim != 4:
        raise DatasetError(f"{where}: images must have shape (N, H, W) or (N, H, W, C); got {x.shape}")
    if not 1 <= x.shape[-1] <= 4:
        raise DatasetError(f"{where}: images must have 1 to 4 channels (channels last); got shape {x.shape}")
    if x.shape[0] == 0 or x.size == 0:
        raise DatasetError(f"{where}: holds no images (shape {x.shape})")
    if x.dtype == np.uint8:
        return x
    if x.dtype.kind in "iu":
        lo, hi = int(x.min()), int(x.max())
        if lo < 0 or hi > 255:
            raise DatasetError(f"{where}: integer pixel values must be in 0..255; found {lo}..{hi}")
        return x.astype(np.uint8)
    if x.dtype.kind == "f":
        if not np.isfinite(x).all():
            raise DatasetError(f"{where}: pixel values include NaN or infinity")
        low, high = float(x.min()), float(x.max())
        if low < 0 or high > 255:
            raise DatasetError(f"{where}: float pixel values must be in [0, 1] or [0, 255]; found {low:g}..{high:g}")
        scale = np.float32(255.0 if high <= 1.0 else 1.0)
        return np.rint(x.astype(np.float32) * scale).astype(np.uint8)
    raise DatasetError(f"{where}: pixel values must be numbers; got dtype {x.dtype}")


def as_labels(y: Any, where: str) -> np.ndarray:
    """(N,) or (N, 1) integer labels (or integral floats) -> (N,) int64, none negative."""
    y = np.asarray(y)
    if y.ndim == 2 and y.shape[1] == 1:  # the Keras CIFAR layout
        y = y[:, 0]
    if y.ndim != 1:
        raise DatasetError(f"{where}: labels must have shape (N,) or (N, 1) of class indices; got {y.shape}")
    if y.dtype.kind == "f":
        if not (np.isfinite(y).all() and (y == np.round(y)).all()):
            raise DatasetError(f"{where}: labels must be whole class indices; found non-integer values")
    elif y.dtype.kind not in "iub":
        raise DatasetError(f"{where}: labels must be integer class indices; got dtype {y.dtype}")
    y = y.astype(np.int64)
    if len(y) and y.min() < 0:
        raise DatasetError(f"{where}: labels must be >= 0; found {int(y.min())}")
    return y


def make_dataset(name: str, source: str, x_train: Any, y_train: Any, x_test: Any, y_test: Any,
                 class_names: Sequence[str] | None = None, warnings: list[str] | None = None) -> Dataset:
    """Validate raw arrays read from ``source`` (the file named in errors) into a Dataset.

    Without ``class_names`` the classes are "0".."K-1", K being one more than the largest label.
    """
    xs = {"x_train": as_images(x_train, f"{source}: x_train"), "x_test": as_images(x_test, f"{source}: x_test")}
    ys = {"y_train": as_labels(y_train, f"{source}: y_train"), "y_test": as_labels(y_test, f"{source}: y_test")}
    for part in ("train", "test"):
        n_x, n_y = len(xs[f"x_{part}"]), len(ys[f"y_{part}"])
        if n_x != n_y:
            raise DatasetError(f"{source}: x_{part} has {n_x} images but y_{part} has {n_y} labels")
    if xs["x_train"].shape[1:] != xs["x_test"].shape[1:]:
        raise DatasetError(f"{source}: train images are {xs['x_train'].shape[1:]} but test images are "
                           f"{xs['x_test'].shape[1:]}")
    top = max(int(ys["y_train"].max()), int(ys["y_test"].max()))
    if class_names is None:
        if top >= MAX_CLASSES:
            raise DatasetError(f"{source}: labels go up to {top}; expected class indices 0..K-1")
        class_names = [str(i) for i in range(top + 1)]
    else:
        class_names = [str(c) for c in class_names]
        for key, y in ys.items():
            if len(y) and y.max() >= len(class_names):
                raise DatasetError(f"{source}: {key} has label {int(y.max())}, out of range for "
                                   f"{len(class_names)} classes (0..{len(class_names) - 1})")
    return Dataset(name, xs["x_train"], ys["y_train"], xs["x_test"], ys["y_test"],
                   list(class_names), list(warnings or []))


def stratified_split(y: np.ndarray, test_fraction: float, seed: int = SPLIT_SEED) -> tuple[np.ndarray, np.ndarray]:
    """Indices (train, test), each sorted: every class with >= 2 examples gives round(n * f),
    at least 1 and at most n - 1, of its examples to the test set. Same result for the same y."""
    rng = np.random.default_rng(seed)
    test: list[np.ndarray] = []
    for label in np.unique(y):
        members = np.flatnonzero(y == label)
        n = len(members)
        k = min(max(int(round(n * test_fraction)), 1), n - 1) if n >= 2 else 0
        test.append(rng.permutation(members)[:k])
    test_idx = np.sort(np.concatenate(test)) if test else np.empty(0, np.int64)
    train_mask = np.ones(len(y), bool)
    train_mask[test_idx] = False
    return np.flatnonzero(train_mask), test_idx


def few(names: Sequence[str], limit: int = 5) -> str:
    """'a, b, c and 7 more' for warnings and errors that must stay one line."""
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


class Throttle:
    """Forwards progress events at most every ``interval`` seconds, plus the first and the last
    (``done == total``), so a fast loop cannot flood the engine's event stream."""

    def __init__(self, progress: ProgressCallback | None, interval: float = 0.25) -> None:
        self._progress = progress
        self._interval = interval
        self._last = -float("inf")

    def __call__(self, stage: str, what: str, done: int, total: int | None) -> None:
        if self._progress is None:
            return
        now = time.monotonic()
        if now - self._last >= self._interval or (total is not None and done >= total):
            self._last = now
            self._progress({"stage": stage, "what": what, "done": int(done), "total": total})
