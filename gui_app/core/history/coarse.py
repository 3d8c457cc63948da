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

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from gui_app.core.events import EpochEnd, Event, ReplicaStats, RunStarted, Step
from gui_app.core.gpu_monitor import GpuSample
from gui_app.core.history.findings import RunFindings
from gui_app.core.history.pyramid import (
    BASE,
    GPU_FIGURES,
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
from gui_app.core.history.run import RunHistory
from gui_app.core.history.timing import WINDOW

MAX_BUCKETS = 2048  # per series over the range shown: 4,096 points, drawn in a few ms
# fold_buckets folds the first bucket and this many last ones as events, the rest at once: more
# than any recent-steps window of a series (timing.WINDOW) holds.
EDGE_BUCKETS = 64


def long_history(view: Buckets, started: RunStarted | None, first_started: float | None) -> RunHistory:
    """A long run's history from its buckets (each bucket's min and max: :func:`events_of`),
    before the events after the pyramid's offset, which the caller folds as events: what Open
    shows (rundir.read_long_history) and what ``attach --history`` sends (engine/commands/attach_history.py).
    ``first_started``: the run's first run_started's time (a resumed run's list says when it began)."""
    history = RunHistory()
    if started is not None:
        history.add([started])
    findings, history.findings = history.findings, QuietFindings()
    fold_buckets(history, view)
    history.findings = findings
    split = history.timing.history
    split.clear()
    for row in split_rows(view):
        split.append(row)
    history.status.started = first_started
    history.coarse = True
    return history


class QuietFindings(RunFindings):
    """Findings that ignore the buckets' made-up steps: what ``diagnose`` would say is read from
    the run's real events (the tail), and a step before every validation point kept by the
    stall rule's pruning made each fold walk the whole list (seconds for 2,000 buckets)."""

    def add(self, event: Event) -> bool:
        return False


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
    stats = records["stats"].astype(float)
    stats[stats[:, :, N] == 0] = np.nan
    tables = {stat: _values(stats[:, :, stat]) for stat in (MIN, MAX, MEAN, LAST)}  # bucket -> column -> value
    shape = _Shape(columns)
    out: list[Step | EpochEnd] = []
    for b, (first, last, t0, t1) in enumerate(zip(records["first_step"].tolist(), records["last_step"].tolist(),
                                                  records["t0"].tolist(), records["t1"].tolist())):
        if last > first:
            out.append(shape.step(tables[MIN][b], first, t0))
            out.append(shape.step(tables[MAX][b], last, t1))
        else:
            out.append(shape.step(tables[MEAN][b], first, t1))
        val_loss, val_accuracy = (tables[LAST][b][shape.index[name]] for name in ("val_loss", "val_accuracy"))
        if val_loss is not None or val_accuracy is not None:
            out.append(EpochEnd(epoch=0, step=last, time=t1, val_loss=val_loss, val_accuracy=val_accuracy))
    return out


def fold_buckets(history: RunHistory, view: Buckets) -> None:
    """``history.add(events_of(view))``, the same series, in a tenth of the time: the first bucket
    and the last :data:`EDGE_BUCKETS` are folded as events (they set the replicas, devices and GPUs,
    the recent-steps windows and the latest figures), the buckets between them are appended to
    the series' buffers as arrays (making and folding a Step per point was most of Open's time
    for a long run). Not the same: ``history.timing.history`` gets only the points the step-split
    window keeps (long_history puts :func:`split_rows` there), and the findings see only the
    edges (long_history's are QuietFindings anyway)."""
    records = view.records
    steps_first, steps_last = records["first_step"], records["last_step"]
    ordered = bool(np.all(steps_last >= steps_first) and np.all(steps_first[1:] > steps_last[:-1]))
    if len(records) <= EDGE_BUCKETS + 2 or not ordered:
        history.add(events_of(view))
        return
    end = len(records) - EDGE_BUCKETS
    history.add(events_of(Buckets(view.columns, records[:1])))
    _append_buckets(history, Buckets(view.columns, records[1:end]))
    history.add(events_of(Buckets(view.columns, records[end:])))


def _append_buckets(history: RunHistory, view: Buckets) -> None:
    """The buckets' points (see :func:`events_of`) appended to the series of ``history``, whose
    last step is before the first of them."""
    records, shape = view.records, _Shape(view.columns)
    stats = records["stats"].astype(float)
    stats[stats[:, :, N] == 0] = np.nan
    two = records["last_step"] > records["first_step"]
    values = np.concatenate([np.where(two[:, None], stats[:, :, MIN], stats[:, :, MEAN]), stats[two][:, :, MAX]])
    steps = np.concatenate([records["first_step"], records["last_step"][two]])
    times = np.concatenate([np.where(two, records["t0"], records["t1"]), records["t1"][two]])
    order = np.argsort(steps, kind="stable")  # a bucket's min point, then its max point
    values, steps, times = values[order], steps[order], times[order]
    finite = np.where(np.isfinite(values), values, np.nan)  # as buffers.number reads a figure
    column = {name: finite[:, i] for name, i in shape.index.items()}
    x = steps.astype(float)

    history.training.extend(x, column["loss"], column["accuracy"], column["learning_rate"])
    last = np.where(np.isfinite(stats[:, :, LAST]), stats[:, :, LAST], np.nan)
    history.training.extend_validation(records["last_step"].astype(float), last[:, shape.index["val_loss"]],
                                       last[:, shape.index["val_accuracy"]])

    replicas = history.replicas
    if shape.replicas:
        replicas.steps.extend(x[:, None])
        for f, name in enumerate(REPLICA_FIGURES):
            table = np.full((len(x), replicas.replicas), np.nan)
            table[:, :len(shape.replicas)] = finite[:, [where[f] for where in shape.replicas]]
            replicas.metrics[name].extend(table)

    gpus = history.gpus
    if shape.gpus:
        table = np.full((len(x), len(gpus.indices)), np.nan)
        for g, where in shape.gpus.items():
            table[:, gpus.indices.index(g)] = finite[:, where[0]]  # utilization
        gpus.steps.extend(x[:, None])
        gpus.utilization.extend(table)

    # The recent-steps windows: the points they would keep, folded as steps.
    step_time = values[:, shape.index["step_time"]]
    replica_times = values[:, [where[REPLICA_FIGURES.index("step_time")] for where in shape.replicas]]
    split = ~np.isnan(step_time) & (~np.isnan(replica_times)).any(axis=1)
    waited = ~np.isnan(values[:, shape.index["input_wait"]]) & (step_time > 0)
    keep = np.union1d(np.flatnonzero(split)[-WINDOW:], np.flatnonzero(waited)[-WINDOW:])
    rows = _values(values[keep])
    for i, row in zip(keep.tolist(), rows):
        step = shape.step(row, int(steps[i]), float(times[i]))
        history.timing.add_step(step)
        history.input_wait.add_step(step)
    history.progress.add_times(times.tolist(), steps.tolist())


def _values(table: np.ndarray) -> list[list[float | None]]:
    """``[buckets, columns]`` as Python lists, None where NaN (a figure not measured)."""
    values = table.astype(object)
    values[np.isnan(table)] = None
    return values.tolist()


class _Shape:
    """Where each figure of a step is among the columns: a step of a bucket is built from one
    row of values by position (building them by name cost most of a long run's open)."""

    def __init__(self, columns: list[str]) -> None:
        self.index = {name: i for i, name in enumerate(columns)}
        self.steps = [self.index[name] for name in STEP_FIGURES]
        self.replicas = [[self.index[f"replica{r}.{f}"] for f in REPLICA_FIGURES] for r in range(_replicas(columns))]
        self.gpus = {g: [self.index[f"gpu{g}.{f}"] for f in GPU_FIGURES] for g in _gpus(columns)}

    def step(self, row: list[float | None], step: int, time: float) -> Step:
        replicas = []
        for r, where in enumerate(self.replicas):
            figures: dict[str, Any] = dict(zip(REPLICA_FIGURES, [row[i] for i in where]))
            replicas.append(ReplicaStats(replica=r, device=None, **figures))
        gpus = []
        for g, where in self.gpus.items():
            utilization, memory, temperature, power = (row[i] for i in where)
            gpus.append(GpuSample(index=g, name="", utilization=utilization,
                                  memory_used=None if memory is None else int(memory), memory_total=None,
                                  temperature=temperature, power=power))
        figures = dict(zip(STEP_FIGURES, [row[i] for i in self.steps]))
        return Step(step=step, time=time, replicas=replicas, gpus=gpus or None, **figures)


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
