"""The one writer of a run's pyramid (gui_app/core/history/pyramid.py): folds ``step``,
``epoch_end`` and ``run_started`` events as they are written to (or read from) ``events.jsonl``.

Steps gather in the open bucket of the finest level; when a step of the next bucket comes, the
open bucket becomes a record, and each level's record is folded into the open bucket of the
level above (two records of level k make one of level k+1), so a step costs one Python row and
a record every 256 steps costs a few NumPy reductions.

A resumed run (``run_started`` whose ``start_step`` is behind the last step) and a step written
again cut the levels as RunHistory cuts its series: every bucket not wholly before the cut is
dropped, and the steps of the cut's own finest bucket are read again from the events
(``recover``).
"""
from __future__ import annotations

import math
import os
import time
from operator import attrgetter
from pathlib import Path
from typing import Callable, Iterable

import numpy as np

from gui_app.core import atomic_io
from gui_app.core.events import EpochEnd, Error, Event, RunStarted, Step, Warning
from gui_app.core.history.buffers import number
from gui_app.core.history.pyramid import (
    BASE,
    BASE_COLUMNS,
    FOLDER,
    GPU_FIGURES,
    LEVELS,
    MESSAGES,
    REPLICA_FIGURES,
    SPLIT,
    STEP_FIGURES,
    VALIDATION,
    Meta,
    N,
    gpu_column,
    level_name,
    merge,
    record_dtype,
    replica_column,
    summarize,
)

# recover(first, last, offset hint or None) -> the step and epoch_end events of steps first..last
# with each line's start and end offsets in events.jsonl, in order.
Recover = Callable[[int, int, "int | None"], Iterable[tuple[Event, int, int]]]
_SPLIT_AT = len(STEP_FIGURES)
_VAL_AT = _SPLIT_AT + len(SPLIT)
_MASK = (1 << BASE) - 1
META_EVERY_S = 10.0
_step_figures = attrgetter(*STEP_FIGURES)
_replica_figures = attrgetter(*REPLICA_FIGURES)
_gpu_figures = attrgetter(*GPU_FIGURES)


class _Bucket:
    """The open bucket of the finest level: its rows (steps and validation points) in order."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.rows: list[list] = []  # floats, ints and None (not measured)
        self.row_steps: list[tuple[int, bool, float]] = []  # each row's step, whether a step's, time
        self.steps = 0
        self.first_step = -1
        self.last_step = -1
        self.t0 = math.nan
        self.t1 = math.nan


class PyramidWriter:
    """Keeps ``<run>/history/`` for the events written to ``events.jsonl`` (inode ``inode``).
    ``meta`` is the pyramid found there (its files are cut to its counts), None to start anew."""

    def __init__(self, run_dir: str | Path, inode: int, meta: Meta | None = None,
                 recover: Recover | None = None) -> None:
        self.folder = Path(run_dir) / FOLDER
        self.folder.mkdir(exist_ok=True)
        self.recover = recover
        if meta is None:
            for old in self.folder.glob("level*.bin"):
                old.unlink()
            meta = Meta(list(BASE_COLUMNS), {}, 0, inode)
        self.meta = meta
        meta.inode = inode
        self._index = {name: i for i, name in enumerate(meta.columns)}
        self._replicas: list[int] = []  # replica -> its first column (REPLICA_FIGURES follow it)
        self._gpus: dict[int, int] = {}  # NVML index -> its first column (GPU_FIGURES follow it)
        self._fds: dict[int, int] = {}
        self._open: _Bucket | None = None
        self._acc: dict[int, list[np.void]] = {}  # level -> the records below of its open bucket
        self.bucket_offsets: dict[int, int] = {}  # finest bucket -> where its first step's line starts
        self._meta_written = 0.0
        # The lines before this are in meta's processes and messages already (a reopened pyramid
        # folds the lines of its open bucket again); 0 once the events file is replaced.
        self.counted_to = meta.end
        for path in self.folder.glob("level*.bin"):  # records meta.json does not count: made again
            digits = path.name[len("level"):-len(".bin")]
            if digits.isdigit():
                self._cut(int(digits), meta.counts.get(int(digits), 0))
        last = self._records(BASE, meta.counts.get(BASE, 0) - 1, meta.counts.get(BASE, 0))
        meta.last_step = int(last[0]["last_step"]) if len(last) else -1
        self._load_accumulators()

    # ---- events in ------------------------------------------------------------------------------
    def add(self, event: Event, start: int, end: int) -> None:
        """Fold one event whose line is ``events.jsonl[start:end]``."""
        meta = self.meta
        closed = cut = False
        if isinstance(event, Step):
            if event.step <= meta.last_step:  # written again: the later one counts (RunHistory's rule)
                self.truncate_after(event.step - 1)
                cut = True
            index = event.step >> BASE
            if self._open is not None and self._open.index != index:
                self._close_bucket()
                closed = True
            if self._open is None:
                self._open = _Bucket(index)
                self.bucket_offsets[index] = meta.offset = start
            self._add_step(self._open, event)
            meta.last_step = event.step
        elif isinstance(event, EpochEnd):
            self._add_validation(event)
        elif isinstance(event, RunStarted):
            meta.started_at = start
            if start >= self.counted_to:
                meta.processes.append([event.time, event.time])
            for info in event.replicas:
                self._replica_columns(info.replica)
            for replica in range(event.num_replicas):
                self._replica_columns(replica)
            if event.start_step < meta.last_step:
                self.truncate_after(event.start_step)
                cut = True
        if start >= self.counted_to:  # not a line folded again after a reopen
            if isinstance(event, (Warning, Error)) and len(meta.messages) < MESSAGES:
                meta.messages.append(["error" if isinstance(event, Error) else "warning", event.message])
            if meta.processes and not isinstance(event, RunStarted):
                meta.processes[-1][1] = event.time
        if self._open is None:
            meta.offset = end
        meta.end = end
        # meta.json counts what the level files hold: at once after a cut (the files are
        # shorter than it said), else now and then (a reopen after a crash folds again the
        # events after the offset it gives: the records written since are cut and made again).
        if cut or (closed and time.monotonic() - self._meta_written >= META_EVERY_S):
            self.write_meta()

    def write_meta(self) -> None:
        self._meta_written = time.monotonic()
        try:
            self.meta.write(self.folder)
        except OSError:  # a full disk: the pyramid is a cache of the events, rebuilt when stale
            pass

    def close(self) -> None:
        self.write_meta()
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()

    def _add_step(self, bucket: _Bucket, event: Step) -> None:
        """One row of the step's figures as written (None is NaN once the bucket becomes a
        record): the engine pays this per step, so it is slices of attrgetter tuples."""
        for entry in event.replicas:  # columns first: a row is as wide as the columns
            if entry.replica >= len(self._replicas):
                self._replica_columns(entry.replica)
        gpus = event.gpus or ()
        for sample in gpus:
            if sample.index not in self._gpus:
                self._gpus[sample.index] = self._columns([gpu_column(sample.index, f) for f in GPU_FIGURES])[0]
        row: list = [None] * len(self.meta.columns)
        row[:_SPLIT_AT] = _step_figures(event)
        split, wall = event.time_split(), event.step_time
        if split is not None and wall:
            row[_SPLIT_AT:_VAL_AT] = [part / wall for part in split]
        width = len(REPLICA_FIGURES)
        for entry in event.replicas:
            if entry.replica >= 0:
                at = self._replicas[entry.replica]
                row[at:at + width] = _replica_figures(entry)
        for sample in gpus:
            at = self._gpus[sample.index]
            row[at:at + len(GPU_FIGURES)] = _gpu_figures(sample)
        bucket.rows.append(row)
        bucket.row_steps.append((event.step, True, event.time))
        bucket.steps += 1
        if bucket.first_step < 0:
            bucket.first_step, bucket.t0 = event.step, event.time
        bucket.last_step, bucket.t1 = event.step, event.time

    def _add_validation(self, event: EpochEnd) -> None:
        """An epoch's validation point joins the open bucket (it follows its epoch's last step)."""
        values = (number(event.val_loss), number(event.val_accuracy))
        if self._open is None or all(math.isnan(v) for v in values):
            return
        row: list = [None] * len(self.meta.columns)
        row[_VAL_AT:_VAL_AT + len(VALIDATION)] = (*values, float(event.epoch))
        self._open.rows.append(row)
        self._open.row_steps.append((event.step, False, event.time))

    # ---- columns --------------------------------------------------------------------------------
    def _replica_columns(self, replica: int) -> int:
        """The first of a replica's columns (they follow each other, in REPLICA_FIGURES order)."""
        while len(self._replicas) <= replica:
            r = len(self._replicas)
            self._replicas.append(self._columns([replica_column(r, f) for f in REPLICA_FIGURES])[0])
        return self._replicas[replica]

    def _columns(self, names: list[str]) -> list[int]:
        """The columns of ``names``; new ones are added after the others, in order (an existing
        run's columns are never a mix: a replica's or a GPU's names all come together)."""
        new = [name for name in names if name not in self._index]
        if new:
            self._widen(len(self.meta.columns) + len(new))
            for name in new:
                self._index[name] = len(self.meta.columns)
                self.meta.columns.append(name)
        return [self._index[name] for name in names]

    def _widen(self, columns: int) -> None:
        """Rewrite the records (and the open buckets) with room for more columns: a replica or a
        GPU that appears after the first records (rare: most are known from run_started)."""
        old, new = record_dtype(len(self.meta.columns)), record_dtype(columns)
        width = len(self.meta.columns)

        def widened(records: np.ndarray) -> np.ndarray:
            out = np.zeros(len(records), new)
            for name in ("first_step", "last_step", "steps", "t0", "t1"):
                out[name] = records[name]
            out["stats"] = np.nan
            out["stats"][:, :, N] = 0
            out["stats"][:, :width] = records["stats"][:, :width]
            return out

        for level, count in self.meta.counts.items():
            if count:
                records = widened(self._records(level, 0, count))
                self._close_fd(level)
                atomic_io.write_bytes(self.folder / level_name(level), records.tobytes(), durable=False)
        self._acc = {level: list(widened(np.array(acc, dtype=old))) for level, acc in self._acc.items()}
        if self._open is not None:
            for row in self._open.rows:
                row.extend([None] * (columns - len(row)))

    # ---- records --------------------------------------------------------------------------------
    def _close_bucket(self) -> None:
        bucket, self._open = self._open, None
        assert bucket is not None
        width = len(self.meta.columns)
        rows = np.array([row + [None] * (width - len(row)) for row in bucket.rows], dtype=float)  # None: NaN
        record = np.zeros(1, record_dtype(width))[0]
        record["first_step"], record["last_step"], record["steps"] = bucket.first_step, bucket.last_step, bucket.steps
        record["t0"], record["t1"] = bucket.t0, bucket.t1
        record["stats"] = summarize(rows)
        self._append(BASE, record)

    def _append(self, level: int, record: np.void) -> None:
        fd = self._fds.get(level)
        if fd is None:
            fd = self._fds[level] = os.open(self.folder / level_name(level), os.O_WRONLY | os.O_APPEND | os.O_CREAT,
                                            0o644)
        os.write(fd, record.tobytes())
        self.meta.counts[level] = self.meta.counts.get(level, 0) + 1
        self._fold_up(level, record)

    def _fold_up(self, level: int, record: np.void) -> None:
        """Fold ``record`` into the open bucket of the level above; that bucket becomes a record
        when a record of the next bucket comes."""
        up = level + 1
        if up >= BASE + LEVELS:
            return
        acc = self._acc.setdefault(up, [])
        if acc and int(acc[0]["first_step"]) >> up != int(record["first_step"]) >> up:
            self._acc[up] = []
            self._append(up, merged(acc))
        self._acc[up].append(record)

    def _records(self, level: int, start: int, stop: int) -> np.ndarray:
        dtype = record_dtype(len(self.meta.columns))
        start = max(start, 0)
        if stop <= start:
            return np.zeros(0, dtype)
        with open(self.folder / level_name(level), "rb") as f:
            f.seek(start * dtype.itemsize)
            return np.frombuffer(f.read((stop - start) * dtype.itemsize), dtype=dtype).copy()

    def _cut(self, level: int, count: int) -> None:
        """Keep the first ``count`` records of a level (a torn or uncounted tail goes)."""
        self._close_fd(level)
        path = self.folder / level_name(level)
        size = count * record_dtype(len(self.meta.columns)).itemsize
        try:
            if path.stat().st_size > size:
                os.truncate(path, size)
        except FileNotFoundError:
            count = 0
        self.meta.counts[level] = count

    def _close_fd(self, level: int) -> None:
        fd = self._fds.pop(level, None)
        if fd is not None:
            os.close(fd)

    def _load_accumulators(self) -> None:
        """The open buckets above the finest level, from the records below them (on open, and
        after a cut): the last records of level k-1 that no record of level k holds yet."""
        self._acc = {}
        for up in range(BASE + 1, BASE + LEVELS):
            below = self.meta.counts.get(up - 1, 0)
            if not below:
                break
            count = self.meta.counts.get(up, 0)
            last = self._records(up, count - 1, count)
            done = int(last[0]["first_step"]) >> up if len(last) else -1
            tail = self._records(up - 1, below - 2, below)
            self._acc[up] = [r for r in tail if int(r["first_step"]) >> up > done]

    # ---- a resumed run ---------------------------------------------------------------------------
    def truncate_after(self, step: int) -> None:
        """Drop everything after ``step`` (a resumed run goes on from its checkpoint at ``step``)."""
        for level, count in list(self.meta.counts.items()):
            kept = self._kept(level, count, step)
            if kept < count:
                self._cut(level, kept)
        bucket, cut = self._open, step >> BASE
        self._open = None
        if bucket is not None and bucket.index <= cut:  # keep its rows up to the step
            keep = sum(1 for s, _, _ in bucket.row_steps if s <= step)
            bucket.rows, bucket.row_steps = bucket.rows[:keep], bucket.row_steps[:keep]
            kept_steps = [(s, t) for s, is_step, t in bucket.row_steps if is_step]
            if kept_steps:
                bucket.steps = len(kept_steps)
                bucket.last_step, bucket.t1 = kept_steps[-1]
                self._open = bucket
        self._load_accumulators()
        last = self._records(BASE, self.meta.counts.get(BASE, 0) - 1, self.meta.counts.get(BASE, 0))
        self.meta.last_step = int(last[0]["last_step"]) if len(last) else -1
        if self._open is not None:
            self.meta.last_step = max(self.meta.last_step, self._open.last_step)
        elif step & _MASK != _MASK:  # the cut is inside a bucket dropped above: its first steps again
            self._refill(cut << BASE, step)

    def _kept(self, level: int, count: int, step: int) -> int:
        """How many records of ``level`` lie wholly at or before ``step`` (a binary search)."""
        lo, hi = 0, count
        while lo < hi:
            mid = (lo + hi) // 2
            first = int(self._records(level, mid, mid + 1)[0]["first_step"])
            if ((first >> level) + 1) << level <= step + 1:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def _refill(self, first: int, last: int) -> None:
        """Read the steps ``first..last`` of the cut's own bucket again from the events."""
        if self.recover is None or last < first:
            return
        for event, start, end in list(self.recover(first, last, self.bucket_offsets.get(first >> BASE))):
            if isinstance(event, Step) and not first <= event.step <= last:
                continue
            self.add(event, start, end)


def merged(records: list[np.void]) -> np.void:
    """One record of consecutive records."""
    out = np.zeros(1, records[0].dtype)[0]
    out["first_step"], out["last_step"] = records[0]["first_step"], records[-1]["last_step"]
    out["steps"] = sum(int(r["steps"]) for r in records)
    out["t0"], out["t1"] = records[0]["t0"], records[-1]["t1"]
    out["stats"] = merge(np.stack([r["stats"] for r in records]))
    return out
