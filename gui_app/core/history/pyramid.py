"""A run's history at several resolutions, kept beside its events (``<run>/history/``), so a view
of a long run reads a few MB instead of folding the whole ``events.jsonl``.

The format (version :data:`VERSION`):

- ``level<k>.bin`` for k >= :data:`BASE`: fixed-size records (:func:`record_dtype`), one per
  bucket of 2**k steps, in step order. Buckets are aligned on step numbers (bucket ``j`` of level
  ``k`` holds steps ``j*2**k .. (j+1)*2**k - 1``), so a bucket of level k+1 is exactly two of
  level k. A record holds the bucket's first and last step, how many steps it saw, the first and
  last event time, and per column (``meta.json``'s ``columns``) the count of finite values, min,
  max, mean, first and last (float32). A spike at one step is the max of its bucket at every
  level, so the coarsest view still shows it.
- ``meta.json``: the version, the columns, the number of records of each level, and the byte
  offset of ``events.jsonl`` (and its inode) up to which the records are complete: a reader
  folds the events after that offset (the open buckets and the live tail) itself.

Why not one row per step: a 300,000-step run of 8 replicas has ~90 figures a step; a row per
step is 100+ MB, while buckets from 2**8 steps up are ~2 records per 256 steps, a few MB. The
full resolution of a short range is read from ``events.jsonl`` itself (steps are in order, so
a binary search finds a step's line: gui_app/core/history/pyramid_files.py).

Why plain NumPy records: appending a record is one ``write(2)``, a torn record is cut by size on
open, NumPy is already a dependency, and a level reads with one ``np.fromfile``.

Crash safety: ``meta.json`` is replaced atomically after the records it counts were written;
on open, every level file is cut back to the count ``meta.json`` gives (a record written after
the last ``meta.json``, or torn, is dropped and made again from the events after its offset).
Qt-free and TensorFlow-free.
"""
from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np

from gui_app.core import atomic_io
from gui_app.core.event_codec import fields
from gui_app.core.events import ReplicaStats

VERSION = 1
BASE = 8  # the finest level: buckets of 256 steps (finer views read the events themselves)
LEVELS = 40  # levels BASE .. BASE + LEVELS - 1: more than any run will ever need
FOLDER = "history"
META_FILE = "meta.json"
N, MIN, MAX, MEAN, FIRST, LAST = range(6)  # the statistics of a column in a record
STATS = 6
MESSAGES = 200  # warnings and errors kept in meta.json

# The run's own figures of a step, in the order of their columns.
STEP_FIGURES = ("loss", "accuracy", "learning_rate", "examples_per_sec", "step_time", "input_wait",
                "allreduce_time")
SPLIT = ("split.compute", "split.input", "split.rest")  # StepSplit.history's shares of the step
VALIDATION = ("val_loss", "val_accuracy", "epoch")  # from epoch_end, in the bucket of its step
BASE_COLUMNS = STEP_FIGURES + SPLIT + VALIDATION
REPLICA_FIGURES = tuple(f.name for f in fields(ReplicaStats)
                        if f.as_is & {int, float} and f.name not in ("replica", "worker"))
GPU_FIGURES = ("utilization", "memory_used", "temperature", "power")


def replica_column(replica: int, figure: str) -> str:
    return f"replica{replica}.{figure}"


def gpu_column(index: int, figure: str) -> str:
    return f"gpu{index}.{figure}"


def level_name(level: int) -> str:
    return f"level{level}.bin"


def record_dtype(columns: int) -> np.dtype:
    return np.dtype([("first_step", "<i8"), ("last_step", "<i8"), ("steps", "<i8"),
                     ("t0", "<f8"), ("t1", "<f8"), ("stats", "<f4", (max(columns, 1), STATS))])


def summarize(rows: np.ndarray) -> np.ndarray:
    """The ``[columns, STATS]`` statistics of ``[n, columns]`` values (NaN: not measured)."""
    finite = np.isfinite(rows)
    count = finite.sum(axis=0)
    out = np.full((rows.shape[1], STATS), np.nan)
    out[:, N] = count
    with warnings.catch_warnings():  # an all-NaN column is expected (a figure not measured)
        warnings.simplefilter("ignore", RuntimeWarning)
        out[:, MIN] = np.nanmin(rows, axis=0)
        out[:, MAX] = np.nanmax(rows, axis=0)
        out[:, MEAN] = np.nanmean(rows, axis=0)
    _first_last(out, rows, finite, count > 0)
    return out


def merge(stats: np.ndarray) -> np.ndarray:
    """The statistics of consecutive buckets ``[k, columns, STATS]`` as one bucket's."""
    stats = np.asarray(stats, dtype=float)
    count = stats[:, :, N]
    has = count > 0
    out = np.full(stats.shape[1:], np.nan)
    total = count.sum(axis=0)
    out[:, N] = total
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        out[:, MIN] = np.fmin.reduce(stats[:, :, MIN], axis=0)
        out[:, MAX] = np.fmax.reduce(stats[:, :, MAX], axis=0)
        out[:, MEAN] = np.where(has, stats[:, :, MEAN] * count, 0.0).sum(axis=0) / total
    cols = np.arange(stats.shape[1])
    any_ = has.any(axis=0)
    first = has.argmax(axis=0)
    last = len(stats) - 1 - has[::-1].argmax(axis=0)
    out[:, FIRST] = np.where(any_, stats[first, cols, FIRST], np.nan)
    out[:, LAST] = np.where(any_, stats[last, cols, LAST], np.nan)
    return out


def _first_last(out: np.ndarray, rows: np.ndarray, finite: np.ndarray, has: np.ndarray) -> None:
    cols = np.arange(rows.shape[1])
    first = finite.argmax(axis=0)
    last = len(rows) - 1 - finite[::-1].argmax(axis=0)
    out[:, FIRST] = np.where(has, rows[first, cols], np.nan)
    out[:, LAST] = np.where(has, rows[last, cols], np.nan)


class Meta:
    """``meta.json``: what the level files hold and which events they cover."""

    def __init__(self, columns: list[str], counts: dict[int, int], offset: int = 0, inode: int = 0,
                 last_step: int = -1, end: int = 0, started_at: int = -1,
                 processes: list[list[float]] | None = None, messages: list[list[str]] | None = None) -> None:
        self.columns = columns
        self.counts = counts  # level -> records
        self.offset = offset  # events.jsonl's bytes before this are in the records
        self.inode = inode
        self.last_step = last_step  # the last step the records and the open buckets hold
        self.end = end  # the events' bytes before this were read (those after offset: open buckets)
        self.started_at = started_at  # where the latest run_started's line starts (-1: none yet)
        # [run_started's time, its last event's time] of each process (compare's duration), and
        # the run's warnings and errors ([kind, message], the first MESSAGES: the report's)
        self.processes = processes if processes is not None else []
        self.messages = messages if messages is not None else []

    @classmethod
    def read(cls, folder: Path) -> Meta | None:
        """The meta of ``folder``, or None when missing, damaged or of another version."""
        try:
            value = json.loads((folder / META_FILE).read_text(encoding="utf-8"))
            if value.get("version") != VERSION or value.get("base") != BASE:
                return None
            columns = [str(c) for c in value["columns"]]
            counts = {int(k): int(v) for k, v in value["counts"].items()}
            size = record_dtype(len(columns)).itemsize
            for level, count in counts.items():  # a level file cut short (or lost) is of no use
                if count and (folder / level_name(level)).stat().st_size < count * size:
                    return None
            return cls(columns, counts, int(value["offset"]), int(value["inode"]), int(value["last_step"]),
                       int(value["end"]), int(value["started_at"]),
                       [[float(t) for t in p] for p in value["processes"]],
                       [[str(k), str(m)] for k, m in value["messages"]])
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None

    def write(self, folder: Path) -> None:
        value = {"version": VERSION, "base": BASE, "columns": self.columns,
                 "counts": {str(k): v for k, v in sorted(self.counts.items())},
                 "offset": self.offset, "inode": self.inode, "last_step": self.last_step, "end": self.end,
                 "started_at": self.started_at, "processes": self.processes, "messages": self.messages}
        # Not fsynced: a pyramid lost with a power cut is rebuilt from the (durable) events.
        atomic_io.write_text(folder / META_FILE, json.dumps(value), durable=False)


def read_level(folder: Path, level: int, meta: Meta, start: int = 0, stop: int | None = None) -> np.ndarray:
    """Records ``start:stop`` of one level (of those ``meta`` counts; negative counts from the
    end, as a slice does); empty when there are none."""
    dtype = record_dtype(len(meta.columns))
    start, stop, _ = slice(start, stop).indices(meta.counts.get(level, 0))
    if stop <= start:
        return np.zeros(0, dtype)
    try:
        with open(folder / level_name(level), "rb") as f:
            f.seek(start * dtype.itemsize)
            return np.fromfile(f, dtype=dtype, count=stop - start)
    except (OSError, ValueError):
        return np.zeros(0, dtype)


def first_step_of(folder: Path, level: int, meta: Meta, index: int) -> int:
    """The first step of record ``index`` of a level (one small read)."""
    return int(read_level(folder, level, meta, index, index + 1)["first_step"][0])


def search(folder: Path, level: int, meta: Meta, step: int) -> int:
    """The index of the first record of a level whose bucket ends at or after ``step``."""
    lo, hi = 0, meta.counts.get(level, 0)
    while lo < hi:
        mid = (lo + hi) // 2
        if ((first_step_of(folder, level, meta, mid) >> level) + 1) << level <= step:
            lo = mid + 1
        else:
            hi = mid
    return lo
