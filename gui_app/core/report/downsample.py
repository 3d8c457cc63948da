"""Long series thinned for a page without losing an extreme: per bucket of consecutive points,
the first, the last, the lowest and the highest are kept (the peak downsampling the window's
charts do, pyqtgraph's ``downsampleMethod="peak"``), so a one-step spike in 10,000 steps is
still drawn. NaN points are kept where they break a line (a gap stays a gap)."""
from __future__ import annotations

import numpy as np

BUCKETS = 300  # per series: 4 points a bucket at most, 1,200 points, enough for 1,280 px


def keep_indices(y: np.ndarray, buckets: int = BUCKETS) -> np.ndarray:
    """The indices of ``y`` to draw, sorted: everything when it is short, else per bucket its
    first, last, min and max (NaN-aware), and the first NaN after a finite point (a gap)."""
    y = np.asarray(y, dtype=float)
    n = len(y)
    if n <= 4 * buckets:
        return np.arange(n)
    finite = np.isfinite(y)
    edges = np.linspace(0, n, buckets + 1).astype(np.int64)
    keep = [edges[:-1], edges[1:] - 1]
    lowest, highest = np.where(finite, y, np.inf), np.where(finite, y, -np.inf)
    for start, end in zip(edges[:-1], edges[1:]):
        if end > start and finite[start:end].any():
            low, high = np.argmin(lowest[start:end]), np.argmax(highest[start:end])
            keep.append(np.array([start + int(low), start + int(high)]))
    gaps = np.flatnonzero(~finite[1:] & finite[:-1]) + 1  # where a line must break
    keep.append(gaps)
    return np.unique(np.concatenate(keep))


def thin(x: np.ndarray, y: np.ndarray, buckets: int = BUCKETS) -> tuple[np.ndarray, np.ndarray]:
    """(x, y) with only :func:`keep_indices` of them."""
    index = keep_indices(y, buckets)
    return np.asarray(x, dtype=float)[index], np.asarray(y, dtype=float)[index]
