"""The run's misclassified test images (``misclassified.npz``: ``x``, ``y_true``, ``y_pred``,
``confidence``, ``index``), read and checked once for the Evaluation tab's gallery and the
report. Qt-free and TensorFlow-free (numpy only)."""
from __future__ import annotations

from pathlib import Path

import numpy as np


def load_misclassified(path: Path) -> dict[str, np.ndarray] | None:
    """The arrays of ``misclassified.npz``, or None when the file does not exist."""
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {key: data[key] for key in data.files}
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path}: cannot read: {exc}") from None
    return checked_misclassified(arrays, where=str(path))


def checked_misclassified(arrays: dict | None, where: str = "misclassified") -> dict[str, np.ndarray] | None:
    """Validated gallery arrays: ``x`` as uint8 [n, H, W, C], labels as ints, ``confidence``
    as floats (NaN when absent), all of one length. ValueError naming ``where`` and the array."""
    if arrays is None:
        return None
    for key in ("x", "y_true", "y_pred"):
        if key not in arrays:
            raise ValueError(f"{where}: missing array {key!r}")
    x = _as_uint8_images(np.asarray(arrays["x"]), where)
    checked = {"x": x}
    for key in ("y_true", "y_pred", "confidence"):
        values = np.asarray(arrays.get(key, np.full(len(x), np.nan)))
        if values.shape != (len(x),) or not np.issubdtype(values.dtype, np.number):
            raise ValueError(f"{where}: array {key!r}: expected {len(x)} numbers, one per image; "
                             f"got {values.dtype} {list(values.shape)}")
        checked[key] = values.astype(float if key == "confidence" else np.int64)
    return checked


def _as_uint8_images(x: np.ndarray, where: str) -> np.ndarray:
    """[n, H, W] or [n, H, W, C] as uint8 (float images in [0, 1] are scaled)."""
    if not (x.ndim == 3 or (x.ndim == 4 and x.shape[-1] in (1, 3, 4))) or not np.issubdtype(x.dtype, np.number):
        raise ValueError(f"{where}: array 'x': expected images [n, H, W] or [n, H, W, C] with C = 1, 3 or 4; "
                         f"got {x.dtype} {list(x.shape)}")
    if x.dtype != np.uint8:
        x = x.astype(float)
        if x.size and np.nanmax(x) <= 1.0:
            x = x * 255.0
        x = np.clip(np.nan_to_num(x), 0, 255).astype(np.uint8)
    return x[..., None] if x.ndim == 3 else x
