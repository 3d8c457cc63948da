"""A long run shown from its pyramid (gui_app/core/history/pyramid.py): at most a few thousand
buckets per series over the whole run (:func:`buckets`), folded into a RunHistory as two points
per bucket -- its min at its first step, its max at its last -- so the charts draw the envelope
pyqtgraph's peak downsampling would draw, and every extreme stays visible (:func:`fold_buckets`).

The buckets come from the coarsest level that still has enough of them over the range asked,
then the records of the finer levels after it (the open buckets of the coarse level), so the
run's end is drawn finer; the events after the pyramid's offset (its open finest bucket and the
live tail) are folded by the caller as events, as the window always folds them.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from gui_app.core.events import EpochEnd, ReplicaStats, Step
from gui_app.core.gpu_monitor import GpuSample
from gui_app.core.history.pyramid import (
    BASE,
    LAST,
    MAX,
    MEAN,
    MIN,
    REPLICA_FIGURES,
    SPLIT,
    STEP_FIGURES,
    Meta,
    N,
    read_level,
    search,
)

MAX_BUCKETS = 2048  # per series over the range shown: 4,096 points, drawn in a few ms


@dataclass
class Buckets:
    """Consecutive buckets: their records (pyramid.record_dtype) and what their columns are."""

    columns: list[str]
    records: np.ndarray

    def column(self, name: str, stat: int) -> np.ndarray:
        """One statistic of one column, per bucket (NaN where the bucket has no value of it)."""
        if name not in self.columns:
            return np.full(len(self.records), np.nan)
        values = self.records["stats"][:, self.columns.index(name), stat].astype(float)
        values[self.records["stats"][:, self.columns.index(name), N] == 0] = np.nan
        return values


def buckets(folder: Path, meta: Meta, first: int = 0, last: int | None = None,
            max_buckets: int = MAX_BUCKETS) -> Buckets:
    """The buckets of steps ``first..last`` (default: to the end): the finest level with at most
    ``max_buckets`` over that range, then finer records after it up to the pyramid's offset."""
    last = meta.last_step if last is None else last
    levels = sorted(level for level, count in meta.counts.items() if count)
    if not levels:
        return Buckets(meta.columns, read_level(folder, BASE, meta))
    span = max(last - first + 1, 1)
    level = next((k for k in levels if span >> k <= max_buckets), levels[-1])
    parts = [_between(folder, meta, level, first, last)]
    covered = int(parts[0]["last_step"][-1]) if len(parts[0]) else first - 1
    for finer in range(level - 1, BASE - 1, -1):  # the open buckets of the coarser levels, finer
        tail = read_level(folder, finer, meta, -4)
        tail = tail[(tail["first_step"] > covered) & (tail["first_step"] <= last)]
        if len(tail):
            parts.append(tail)
            covered = int(tail["last_step"][-1])
    return Buckets(meta.columns, np.concatenate(parts))


def _between(folder: Path, meta: Meta, level: int, first: int, last: int) -> np.ndarray:
    start = search(folder, level, meta, first)
    stop = search(folder, level, meta, last + 1)
    records = read_level(folder, level, meta, start, stop + 1)
    return records[(records["last_step"] >= first) & (records["first_step"] <= last)]


def _replicas(columns: list[str]) -> int:
    return sum(1 for name in columns if name.startswith("replica") and name.endswith(".loss"))


def _gpus(columns: list[str]) -> list[int]:
    return [int(name[3:].split(".")[0]) for name in columns if name.startswith("gpu") and name.endswith(".utilization")]


def events_of(view: Buckets) -> list[Step | EpochEnd]:
    """The buckets as events a RunHistory folds: per bucket a step at its first step holding
    every figure's min and one at its last step holding the max (one step holding the mean for
    a bucket of one step), and its last validation point."""
    records, columns = view.records, view.columns
    replicas, gpus = _replicas(columns), _gpus(columns)
    index = {name: i for i, name in enumerate(columns)}
    stats = records["stats"].astype(float)
    stats[stats[:, :, N] == 0] = np.nan
    out: list[Step | EpochEnd] = []
    for b, record in enumerate(records):
        first, last = int(record["first_step"]), int(record["last_step"])
        ends = [(first, MIN, float(record["t0"])), (last, MAX, float(record["t1"]))] if last > first \
            else [(first, MEAN, float(record["t1"]))]
        table = stats[b]
        for step, stat, time in ends:
            out.append(_step(stats[b], index, stat, step, time, replicas, gpus))
        val_loss, val_accuracy = (table[index[name], LAST] for name in ("val_loss", "val_accuracy"))
        if not (math.isnan(val_loss) and math.isnan(val_accuracy)):
            out.append(EpochEnd(epoch=0, step=last, time=float(record["t1"]),
                                val_loss=None if math.isnan(val_loss) else float(val_loss),
                                val_accuracy=None if math.isnan(val_accuracy) else float(val_accuracy)))
    return out


def _step(table: np.ndarray, index: dict[str, int], stat: int, step: int, time: float, replicas: int,
          gpus: list[int]) -> Step:
    """A step holding one statistic of every figure of a bucket."""
    def value(name: str) -> float | None:
        v = table[index[name], stat] if name in index else math.nan
        return None if math.isnan(v) else float(v)

    def replica(r: int) -> ReplicaStats:
        figures: dict[str, Any] = {f: value(f"replica{r}.{f}") for f in REPLICA_FIGURES}
        return ReplicaStats(replica=r, device=None, **figures)

    def gpu(g: int) -> GpuSample:
        memory = value(f"gpu{g}.memory_used")
        return GpuSample(index=g, name="", utilization=value(f"gpu{g}.utilization"),
                         memory_used=None if memory is None else int(memory), memory_total=None,
                         temperature=value(f"gpu{g}.temperature"), power=value(f"gpu{g}.power"))

    figures: dict[str, Any] = {name: value(name) for name in STEP_FIGURES}
    return Step(step=step, time=time, replicas=[replica(r) for r in range(replicas)],
                gpus=[gpu(g) for g in gpus] or None, **figures)


def split_rows(view: Buckets) -> np.ndarray:
    """``[points, 4]`` rows of StepSplit.history (step, compute, input, rest shares) of the
    buckets: min at each bucket's first step, max at its last."""
    rows = []
    for stat, at in ((MIN, "first_step"), (MAX, "last_step")):
        shares = np.column_stack([view.column(name, stat) for name in SPLIT])
        rows.append(np.column_stack([view.records[at].astype(float), shares]))
    if not len(view.records):
        return np.zeros((0, 4))
    merged = np.empty((2 * len(view.records), 4))
    merged[0::2], merged[1::2] = rows
    merged = merged[np.isfinite(merged[:, 1:]).any(axis=1)]
    keep = np.concatenate([[True], np.diff(merged[:, 0]) > 0]) if len(merged) else np.zeros(0, bool)
    return merged[keep]  # steps strictly increasing (a one-step bucket gives one point)
