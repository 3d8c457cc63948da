"""Runs side by side: the configuration keys that differ between them and each one's final
figures, with runs that differ only in their seed grouped into one row (mean ± std, and
mean/min/max curves for a band: per step, or per epoch for the validation figures).

For ``replica-studio compare`` and the window's comparison view; Qt-free and TensorFlow-free.
Runs are read with gui_app/core/rundir.py (the events folded once, without per-replica rows).
"""
from __future__ import annotations

import csv
import io
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from gui_app.core import rundir
from gui_app.core.events import EpochEnd, RunFinished, RunStarted, Step
from gui_app.core.history.pyramid import LAST, MEAN
from gui_app.core.overrides import flatten

SEED_KEY = "training.seed"
METRICS = ("test_accuracy", "val_accuracy", "val_loss", "steps", "duration")
CURVES = {"loss": "steps", "accuracy": "steps", "val_accuracy": "epochs", "val_loss": "epochs"}  # curve: its x


@dataclass
class RunFigures:
    """One run's configuration (dotted keys) and final figures; a figure the run never reached is None."""

    run_dir: Path
    config: dict[str, Any]
    status: str
    started: float | None
    test_accuracy: float | None
    val_accuracy: float | None  # the last epoch's
    val_loss: float | None
    steps: int
    duration: float | None  # seconds the run's processes worked, resumes added up
    curve_steps: np.ndarray = field(repr=False)  # per-step training loss and accuracy, for the bands
    curve_loss: np.ndarray = field(repr=False)
    curve_accuracy: np.ndarray = field(repr=False)
    curve_epochs: np.ndarray = field(repr=False)  # per-epoch validation accuracy and loss
    curve_val_accuracy: np.ndarray = field(repr=False)
    curve_val_loss: np.ndarray = field(repr=False)
    name: str = ""  # what a row calls the run: its folder's name, or its sweep trial's ("trial 3")

    def curve(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """(x, y) of one of :data:`CURVES`: steps or epochs, and the values (NaN where none)."""
        return getattr(self, f"curve_{CURVES[name]}"), getattr(self, f"curve_{name}")


def read_figures(run_dir: str | Path) -> RunFigures:
    """ValueError naming the folder when it is not a run directory."""
    run_dir = Path(run_dir)
    info = rundir.read_run(run_dir)
    if info.config is None:
        raise ValueError(f"{run_dir}: not a run directory (no readable {rundir.CONFIG_FILE})")
    long = rundir.read_long_run(run_dir)
    if long is not None:
        return _long_figures(run_dir, info, long)
    events = rundir.read_events(run_dir, parts=False)
    epochs = _last_each([e for e in events if isinstance(e, EpochEnd)], "epoch")
    steps = _last_each([e for e in events if isinstance(e, Step)], "step")
    try:
        evaluation = rundir.read_eval(run_dir)
    except ValueError:  # a damaged eval.json: the run's own eval event (info.test_accuracy) says the same
        evaluation = None
    last = epochs[-1] if epochs else None
    return RunFigures(
        run_dir=run_dir, config=flatten(info.config.to_dict()), status=info.status, started=info.started,
        test_accuracy=evaluation.accuracy if evaluation else info.test_accuracy,
        val_accuracy=last.val_accuracy if last else None, val_loss=last.val_loss if last else None,
        steps=max(info.step, steps[-1].step if steps else 0), duration=run_duration(events),
        curve_steps=np.array([s.step for s in steps], dtype=np.int64),
        curve_loss=_values(steps, "loss"),
        curve_accuracy=_values(steps, "accuracy"), curve_epochs=np.array([e.epoch for e in epochs], dtype=np.int64),
        curve_val_accuracy=_values(epochs, "val_accuracy"), curve_val_loss=_values(epochs, "val_loss"),
        name=run_dir.name)


def _long_figures(run_dir: Path, info: rundir.RunInfo, long: rundir.LongRun) -> RunFigures:
    """A long run's figures from its pyramid: the curves as each bucket's mean at its last step
    (runs of the same length share their buckets, so a seed group's band lines up), each
    bucket's last validation point, then the events after the pyramid as they are."""
    view = long.buckets()
    steps = _last_each([e for e in long.tail if isinstance(e, Step)], "step")
    tail_epochs = _last_each([e for e in long.tail if isinstance(e, EpochEnd)], "epoch")
    has_val = view.column("epoch", LAST)
    kept = np.isfinite(has_val)
    epochs = np.concatenate([has_val[kept], [e.epoch for e in tail_epochs]]).astype(np.int64)
    val_accuracy = np.concatenate([view.column("val_accuracy", LAST)[kept], _values(tail_epochs, "val_accuracy")])
    val_loss = np.concatenate([view.column("val_loss", LAST)[kept], _values(tail_epochs, "val_loss")])
    epochs, unique = np.unique(epochs[::-1], return_index=True)  # the last written of each epoch
    val_accuracy, val_loss = val_accuracy[::-1][unique], val_loss[::-1][unique]
    try:
        evaluation = rundir.read_eval(run_dir)
    except ValueError:
        evaluation = None
    last_val = (float(val_accuracy[-1]), float(val_loss[-1])) if len(epochs) else (None, None)
    return RunFigures(
        run_dir=run_dir, config=flatten(info.config.to_dict()) if info.config else {}, status=info.status,
        started=info.started, test_accuracy=evaluation.accuracy if evaluation else info.test_accuracy,
        val_accuracy=None if last_val[0] is None or np.isnan(last_val[0]) else last_val[0],
        val_loss=None if last_val[1] is None or np.isnan(last_val[1]) else last_val[1],
        steps=max(info.step, long.meta.last_step), duration=long.duration(),
        curve_steps=np.concatenate([view.records["last_step"], [s.step for s in steps]]).astype(np.int64),
        curve_loss=np.concatenate([view.column("loss", MEAN), _values(steps, "loss")]),
        curve_accuracy=np.concatenate([view.column("accuracy", MEAN), _values(steps, "accuracy")]),
        curve_epochs=epochs, curve_val_accuracy=val_accuracy, curve_val_loss=val_loss, name=run_dir.name)


def _last_each(events: list, key: str) -> list:
    """One event per step (or epoch), the last written, in order: a resumed run writes the steps
    after its checkpoint again (the curves' x must be sorted and unique for the bands)."""
    return sorted({getattr(e, key): e for e in events}.values(), key=lambda e: getattr(e, key))


def _values(events: list, name: str) -> np.ndarray:
    return np.array([np.nan if getattr(e, name) is None else getattr(e, name) for e in events], dtype=np.float64)


def run_duration(events: list) -> float | None:
    """From each process's ``run_started`` to its last event, added up (a resumed run's gap left out)."""
    total, start, end = 0.0, None, None
    for event in events:
        if isinstance(event, RunStarted):
            if start is not None and end is not None:
                total += end - start
            start, end = event.time, event.time
        elif start is not None:
            end = event.time
            if isinstance(event, RunFinished):
                total, start, end = total + end - start, None, None
    if start is not None and end is not None:
        total += end - start
    return total if any(isinstance(e, RunStarted) for e in events) else None


@dataclass
class Stat:
    """A figure over a group's runs: the mean, the sample standard deviation (None for one run)."""

    mean: float | None
    std: float | None
    count: int

    @classmethod
    def of(cls, values: list[float | None]) -> Stat:
        known = [float(v) for v in values if v is not None and np.isfinite(v)]
        if not known:
            return cls(None, None, 0)
        return cls(statistics.fmean(known), statistics.stdev(known) if len(known) > 1 else None, len(known))

    def text(self, digits: int = 4) -> str:
        if self.mean is None:
            return "-"
        return f"{self.mean:.{digits}f}" + (f" ± {self.std:.{digits}f}" if self.std is not None else "")


@dataclass
class Band:
    """A group's curve: mean, min and max over its runs, at the steps (or epochs) all of them reached."""

    steps: np.ndarray  # the epochs, for a validation curve
    mean: np.ndarray
    low: np.ndarray
    high: np.ndarray


@dataclass
class Row:
    """One run, or runs that differ only in their seed."""

    values: dict[str, Any]  # the differing keys' values (the seed left out when runs are grouped)
    runs: list[RunFigures]

    @property
    def names(self) -> list[str]:
        return [run.name for run in self.runs]

    @property
    def seeds(self) -> list[Any]:
        return [run.config.get(SEED_KEY) for run in self.runs]

    def stat(self, metric: str) -> Stat:
        return Stat.of([getattr(run, metric) for run in self.runs])

    def band(self, curve: str = "loss") -> Band:
        """``curve`` is one of :data:`CURVES`."""
        curves = [run.curve(curve) for run in self.runs]
        common = curves[0][0]
        for x, _ in curves[1:]:
            if not np.array_equal(x, common):  # most seed repeats reached the same steps: nothing to match
                common = np.intersect1d(common, x, assume_unique=True)
        stacked = np.stack([y if np.array_equal(x, common) else y[np.searchsorted(x, common)] for x, y in curves]) \
            if len(common) else np.empty((len(self.runs), 0))
        return Band(common, stacked.mean(axis=0), stacked.min(axis=0), stacked.max(axis=0))


@dataclass
class Comparison:
    keys: list[str]  # the configuration keys whose values differ between rows
    rows: list[Row]
    grouped: bool  # runs differing only in the seed share a row

    def table(self) -> tuple[list[str], list[list[str]]]:
        """Header and cells, as text (mean ± std where a row holds several runs)."""
        header = [*self.keys, *(["seeds"] if self.grouped else []), "runs", *METRICS]
        cells = []
        for row in self.rows:
            line = [value_text(row.values.get(key)) for key in self.keys]
            if self.grouped:
                line.append(",".join(value_text(seed) for seed in row.seeds))
            line.append(str(len(row.runs)))
            line += [row.stat(m).text(0 if m in ("steps", "duration") else 4) for m in METRICS]
            cells.append(line)
        return header, cells

    def to_csv(self) -> str:
        """One line per row; numbers as numbers (mean, and a ``_std`` column beside each figure)."""
        out = io.StringIO()
        writer = csv.writer(out)
        figures = [name for m in METRICS for name in (m, f"{m}_std")]
        writer.writerow([*self.keys, "seeds", "runs", *figures, "run_dirs", "names"])
        for row in self.rows:
            stats = [row.stat(m) for m in METRICS]
            writer.writerow([*(row.values.get(k) for k in self.keys), " ".join(value_text(s) for s in row.seeds),
                             len(row.runs), *(v for s in stats for v in (_num(s.mean), _num(s.std))),
                             " ".join(str(r.run_dir) for r in row.runs), ", ".join(row.names)])
        return out.getvalue()

    def to_json(self) -> dict[str, Any]:
        return {"keys": self.keys, "grouped": self.grouped, "rows": [
            {"values": row.values, "seeds": row.seeds, "run_dirs": [str(r.run_dir) for r in row.runs],
             "names": row.names,
             **{m: {"mean": row.stat(m).mean, "std": row.stat(m).std} for m in METRICS}} for row in self.rows]}


def differing_keys(configs: list[dict[str, Any]]) -> list[str]:
    """The dotted keys whose values are not the same in every configuration, in config order."""
    keys = list(dict.fromkeys(k for c in configs for k in c))
    return [k for k in keys if len({repr(c.get(k)) for c in configs}) > 1]


def compare(runs: list[RunFigures], group_seeds: bool = True) -> Comparison:
    """Rows in the order the runs were given (a group where its first run was)."""
    keys = differing_keys([r.config for r in runs])
    shown = [k for k in keys if k != SEED_KEY] if group_seeds else keys
    rows: dict[str, Row] = {}
    for run in runs:
        values = {k: run.config.get(k) for k in shown}
        ident = repr(sorted(values.items())) if group_seeds else str(run.run_dir)
        rows.setdefault(ident, Row(values, [])).runs.append(run)
    grouped = group_seeds and any(len(row.runs) > 1 for row in rows.values())
    if not grouped:  # nothing shared a row: the seed is an ordinary differing key
        shown = keys
        rows = {str(r.run_dir): Row({k: r.config.get(k) for k in keys}, [r]) for r in runs}
    return Comparison(shown, list(rows.values()), grouped)


def value_text(value: Any) -> str:
    """A configuration value as the table shows it (floats to 4 significant digits)."""
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, list):
        return "[" + ", ".join(value_text(v) for v in value) + "]"
    return "-" if value is None else str(value)


def _num(value: float | None) -> str:
    return "" if value is None else repr(value)
