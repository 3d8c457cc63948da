"""The data behind the live charts, Qt-free: growable numpy buffers, EMA smoothing and
JSON-number parsing. Charts append here and hand views of the buffers to ``setData``."""
from __future__ import annotations

import math
from typing import Any

import numpy as np


def number(value: Any) -> float:
    """A JSON number as float; ``null``, non-numbers and infinities become NaN."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = float(value)
        return value if math.isfinite(value) else math.nan
    return math.nan


class GrowableArray:
    """Rows of floats in a numpy array that doubles its capacity when full.

    Appending is amortised O(1); ``data`` is a view of the filled rows, cheap to hand to
    ``setData`` (pyqtgraph copies what it needs).
    """

    def __init__(self, columns: int, capacity: int = 1024) -> None:
        self._buf = np.full((max(capacity, 1), columns), np.nan)
        self._n = 0

    def __len__(self) -> int:
        return self._n

    @property
    def columns(self) -> int:
        return self._buf.shape[1]

    @property
    def data(self) -> np.ndarray:
        return self._buf[: self._n]

    def column(self, index: int) -> np.ndarray:
        return self._buf[: self._n, index]

    def last(self, index: int) -> float:
        return float(self._buf[self._n - 1, index]) if self._n else math.nan

    def append(self, row) -> None:
        if self._n == len(self._buf):
            self._reserve(2 * len(self._buf))
        self._buf[self._n] = row
        self._n += 1

    def truncate(self, n: int) -> None:
        """Keep the first ``n`` rows."""
        self._n = max(0, min(n, self._n))
        self._buf[self._n:] = np.nan

    def clear(self) -> None:
        self.truncate(0)

    def set_columns(self, columns: int) -> None:
        """Widen (NaN-padded) or narrow the buffer, keeping its rows."""
        if columns == self.columns:
            return
        buf = np.full((len(self._buf), columns), np.nan)
        keep = min(columns, self.columns)
        buf[:, :keep] = self._buf[:, :keep]
        self._buf = buf

    def _reserve(self, capacity: int) -> None:
        buf = np.full((capacity, self.columns), np.nan)
        buf[: self._n] = self._buf[: self._n]
        self._buf = buf


class Ema:
    """TensorBoard's debiased exponential moving average.

    ``smoothing`` is the weight of the history (0 = no smoothing). Dividing by
    ``1 - smoothing**n`` removes the pull towards zero at the start. Non-finite inputs are
    skipped: the output repeats the last smoothed value.
    """

    def __init__(self, smoothing: float = 0.9) -> None:
        if not 0.0 <= smoothing < 1.0:
            raise ValueError(f"smoothing: must be in [0, 1); got {smoothing}")
        self.smoothing = smoothing
        self.reset()

    def reset(self) -> None:
        self._biased = 0.0
        self._count = 0
        self._last = math.nan

    def update(self, value: float) -> float:
        if math.isfinite(value):
            w = self.smoothing
            self._biased = self._biased * w + (1.0 - w) * value
            self._count += 1
            self._last = self._biased / (1.0 - w ** self._count)
        return self._last


def ema(values: np.ndarray, smoothing: float) -> np.ndarray:
    """The debiased EMA of a whole series (see :class:`Ema`)."""
    state = Ema(smoothing)
    return np.fromiter((state.update(v) for v in np.asarray(values, dtype=float).tolist()),
                       dtype=float, count=len(values))
