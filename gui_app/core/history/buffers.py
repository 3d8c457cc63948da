"""The storage of a run's history: growable numpy buffers, EMA smoothing, and event figures as
floats. The history's series append here; charts hand views of the buffers to ``setData``."""
from __future__ import annotations

import math
from typing import Any

import numpy as np


def number(value: Any) -> float:
    """A figure of an event as a float; None (not measured), non-numbers and infinities are NaN."""
    if value.__class__ is float:  # nearly always: checked first, inline (a fold calls this 13 times a step)
        return value if value - value == 0.0 else math.nan  # inf - inf and NaN - NaN are NaN
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = float(value)
        return value if math.isfinite(value) else math.nan
    return math.nan


PENDING_ROWS = 1024


class GrowableArray:
    """Rows of floats in a numpy array that doubles its capacity when full.

    Appended rows wait in a list and go into the array in one assignment when the array is
    read, or when :data:`PENDING_ROWS` are waiting (a series nobody draws must not hold a
    hundred thousand Python rows for the garbage collector to walk): appending a row to numpy
    one by one cost 0.7 µs, more than the rest of a step's fold. ``data`` is a view of the
    filled rows, cheap to hand to ``setData`` (pyqtgraph copies what it needs).
    """

    def __init__(self, columns: int, capacity: int = 1024) -> None:
        self._buf = np.full((max(capacity, 1), columns), np.nan)
        self._n = 0
        self._pending: list = []  # rows appended since the last read

    def __len__(self) -> int:
        return self._n + len(self._pending)

    @property
    def columns(self) -> int:
        return self._buf.shape[1]

    @property
    def data(self) -> np.ndarray:
        self._flush()
        return self._buf[: self._n]

    def column(self, index: int) -> np.ndarray:
        self._flush()
        return self._buf[: self._n, index]

    def last(self, index: int) -> float:
        if self._pending:
            return float(self._pending[-1][index])
        return float(self._buf[self._n - 1, index]) if self._n else math.nan

    def append(self, row) -> None:
        self._pending.append(row)
        if len(self._pending) >= PENDING_ROWS:
            self._flush()

    def extend(self, rows: np.ndarray) -> None:
        """Append ``[n, columns]`` rows at once (a long run's buckets: rundir.read_long_history)."""
        self._flush()
        end = self._n + len(rows)
        if end > len(self._buf):
            self._reserve(max(2 * len(self._buf), end))
        self._buf[self._n:end] = rows
        self._n = end

    def truncate(self, n: int) -> None:
        """Keep the first ``n`` rows."""
        self._flush()
        self._n = max(0, min(n, self._n))
        self._buf[self._n:] = np.nan

    def clear(self) -> None:
        self._pending.clear()
        self.truncate(0)

    def set_columns(self, columns: int) -> None:
        """Widen (NaN-padded) or narrow the buffer, keeping its rows."""
        if columns == self.columns:
            return
        self._flush()
        buf = np.full((len(self._buf), columns), np.nan)
        keep = min(columns, self.columns)
        buf[:, :keep] = self._buf[:, :keep]
        self._buf = buf

    def _flush(self) -> None:
        if not self._pending:
            return
        rows, self._pending = self._pending, []
        end = self._n + len(rows)
        if end > len(self._buf):
            self._reserve(max(2 * len(self._buf), end))
        self._buf[self._n:end] = rows
        self._n = end

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
