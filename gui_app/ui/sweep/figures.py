"""What the sweep view draws, from ``sweep status --json`` (gui_app/engine/sweep/status.py) and the
sweep file: the best-so-far line, the parallel coordinates, and how a sweep ended. Qt-free."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from gui_app.core.answers import SweepStatus, SweepTrial
from gui_app.core.sweep_config import Parameter

DONE = ("completed", "pruned", "failed")  # states no process works on any more
METRICS = {"val_accuracy": "Validation accuracy", "val_loss": "Validation loss", "test_accuracy": "Test accuracy"}


def finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def best_so_far(trials: list[SweepTrial], direction: str) -> tuple[list[int], list[float], list[float]]:
    """The completed trials' numbers and metrics, and the best metric after each of them."""
    numbers: list[int] = []
    values: list[float] = []
    best: list[float] = []
    pick = max if direction == "maximize" else min
    for trial in sorted(trials, key=lambda t: t.number):
        if trial.state == "completed" and trial.metric is not None and finite(trial.metric):
            numbers.append(trial.number)
            values.append(trial.metric)
            best.append(pick(best[-1], values[-1]) if best else values[-1])
    return numbers, values, best


def position(parameter: Parameter, value: Any) -> float:
    """Where ``value`` lies on ``parameter``'s axis, 0 (low, first choice) to 1 (high, last choice);
    NaN for a value off the axis."""
    if parameter.kind == "choice":
        if value not in parameter.values:
            return math.nan
        return parameter.values.index(value) / (len(parameter.values) - 1) if len(parameter.values) > 1 else 0.5
    if not finite(value):
        return math.nan
    low, high = parameter.values
    if parameter.kind == "log_uniform":
        low, high, value = math.log(low), math.log(high), math.log(value) if value > 0 else math.nan
    return (value - low) / (high - low)


@dataclass
class Coordinates:
    """Each drawn trial's line over the axes (the parameters, then the metric), every value in [0, 1]."""

    axes: list[str]
    numbers: list[int]
    lines: list[list[float]]
    metrics: list[float]  # each line's metric, for its colour
    metric_range: tuple[float, float]


def parallel_coordinates(trials: list[SweepTrial], parameters: tuple[Parameter, ...], metric: str) -> Coordinates:
    """The trials that have a metric, as lines over normalised axes (the metric's axis spans the
    metrics seen; one value sits in its middle)."""
    shown = [t for t in sorted(trials, key=lambda t: t.number) if finite(t.metric)]
    metrics = [float(t.metric or 0.0) for t in shown]
    low, high = (min(metrics), max(metrics)) if metrics else (0.0, 1.0)
    lines = [[position(p, t.parameters.get(p.key)) for p in parameters]
             + [(m - low) / (high - low) if high > low else 0.5] for t, m in zip(shown, metrics)]
    return Coordinates([p.key for p in parameters] + [metric], [t.number for t in shown], lines, metrics,
                       (low, high))


def outcome(status: SweepStatus, log_lines: list[str]) -> tuple[str, str]:
    """How a sweep whose process has ended ended -- ``completed``, ``stopped`` or ``failed`` -- and
    its line: the sweep's own last words in its log (``sweep completed: ...``), else what its
    trials say (a sweep started without ``--detach`` has no log)."""
    for line in reversed(log_lines[-3:]):
        for kind in ("completed", "stopped"):
            if line.startswith(f"sweep {kind}: "):
                return kind, line
    open_trials = [t for t in status.trials if t.state not in DONE]
    if not log_lines and not open_trials and not status.stop_asked:
        return "completed", f"{len(status.trials)} trials"
    if status.stop_asked:
        return "stopped", "stopped; Resume continues it"
    last = next((line for line in reversed(log_lines) if line.strip()), "")
    return "failed", (last or "its process ended") + "; Resume continues it"
