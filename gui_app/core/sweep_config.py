"""A sweep file: a base run configuration, the keys to vary and how, the metric, the search method,
early stopping and the budget (docs/config.md, "Sweep files").

Validated like the run configuration: every mistake is a :class:`ConfigError` whose message
starts with the key (``parameters.training.learning_rate.log_uniform: ...``). Each end of a range
and each choice is applied to the base and validated as a run configuration, so a value the run
configuration refuses is refused here, before any trial starts. TensorFlow-free and Optuna-free:
the engine's sweep package turns this into an Optuna study.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gui_app.core.config import RunConfig
from gui_app.core.config_json import ConfigError, did_you_mean, fail, parse_json, read_text, show
from gui_app.core.overrides import config_keys, set_keys
from gui_app.core.ssh_hosts import Host
from gui_app.core.sweep_slurm import SweepSlurm, check_slurm_sweep

KINDS = ("log_uniform", "uniform", "int", "choice")
METRICS = ("val_accuracy", "val_loss", "test_accuracy")
DIRECTIONS = ("maximize", "minimize")
METHODS = ("tpe", "random", "grid")
PRUNERS = ("none", "median", "hyperband", "threshold")
MAX_TRIALS = 10_000
MAX_PARALLEL = 64
MAX_GRID_POINTS = 100
LOCAL = "local"  # in ``hosts``: this machine
# The files of a sweep's folder that the window reads too (the layout: gui_app/engine/sweep/folder.py).
SWEEP_FILE = "sweep.json"  # the sweep file, validated, as started
SWEEP_LOG = "sweep.log"  # a detached sweep's stdout and stderr

_DEFAULTS: dict[str, Any] = {
    "metric": "val_accuracy", "direction": None, "method": "tpe", "pruner": "none", "pruner_warmup_epochs": 1,
    "pruner_startup_trials": 2, "grid_points": 3, "trials": 8, "time_limit": None, "parallel": 1, "seed": None,
    "hosts": [LOCAL], "gpus_per_trial": 1, "pruner_threshold": None, "slurm": None,
}
_KEYS = ("base", "parameters", *_DEFAULTS)


@dataclass(frozen=True)
class Parameter:
    """One key to vary: ``kind`` is one of :data:`KINDS`; ``values`` is ``(low, high)`` for a range,
    the list of choices for ``choice``."""

    key: str
    kind: str
    values: tuple[Any, ...]

    def grid(self, points: int) -> list[Any]:
        """The values a grid search tries: every choice, every integer (at most ``points``, evenly
        spread), or ``points`` evenly spread values of a range (geometrically for ``log_uniform``)."""
        if self.kind == "choice":
            return list(self.values)
        low, high = self.values
        if self.kind == "int":
            count = min(points, high - low + 1)
            return sorted({round(low + i * (high - low) / max(count - 1, 1)) for i in range(count)})
        if self.kind == "log_uniform":
            return [low * (high / low) ** (i / (points - 1)) for i in range(points)]
        return [low + (high - low) * i / (points - 1) for i in range(points)]

    def to_dict(self) -> dict[str, Any]:
        return {self.kind: list(self.values)}


@dataclass(frozen=True)
class SweepConfig:
    base: RunConfig
    parameters: tuple[Parameter, ...]
    metric: str = "val_accuracy"
    direction: str = "maximize"
    method: str = "tpe"
    pruner: str = "none"
    pruner_warmup_epochs: int = 1  # epochs a trial runs before it may be pruned
    pruner_startup_trials: int = 2  # median: trials that complete before any is pruned
    grid_points: int = 3  # grid: values tried of each range
    trials: int = 8
    time_limit: float | None = None  # seconds from the sweep's start after which no trial starts
    parallel: int = 1
    seed: int | None = None  # the sampler's seed
    hosts: tuple[str, ...] = (LOCAL,)  # where trials run: "local" (this machine) and SSH hosts (core/ssh_hosts.py)
    gpus_per_trial: int = 1  # this machine's GPUs each trial is given (CUDA_VISIBLE_DEVICES)
    pruner_threshold: float | None = None  # threshold: a trial whose metric is worse after the warm-up stops
    slurm: SweepSlurm | None = None  # set: each trial is a Slurm job (core/sweep_slurm.py)

    # ---- loading --------------------------------------------------------------------------
    @classmethod
    def load(cls, path: str | Path) -> SweepConfig:
        try:
            text = read_text(path)
        except ConfigError as exc:  # it names a run configuration: this is a sweep file
            raise ConfigError(f"sweep{str(exc).removeprefix('config')}") from None
        return cls.from_dict(parse_json(text, "sweep"))

    @classmethod
    def from_dict(cls, data: Any) -> SweepConfig:
        if not isinstance(data, dict):
            fail("sweep", f"must be an object; got {type(data).__name__}")
        unknown = sorted(set(data) - set(_KEYS))
        if unknown:
            fail(_name(unknown[0]), f"unknown key{did_you_mean(unknown[0], _KEYS)} (known keys: "
                                    f"{', '.join(sorted(_KEYS))})")
        if "base" not in data:
            fail("base", "missing: the run configuration every trial starts from")
        try:
            base = RunConfig.from_dict(data["base"])
        except ConfigError as exc:
            raise ConfigError(f"base.{exc}") from None
        values = {**_DEFAULTS, **{k: v for k, v in data.items() if k in _DEFAULTS}}
        metric = _choice("metric", values["metric"], METRICS)
        direction = values["direction"] if values["direction"] is not None else (
            "minimize" if metric == "val_loss" else "maximize")
        sweep = cls(
            base=base, parameters=_parameters(base, data.get("parameters")), metric=metric,
            direction=_choice("direction", direction, DIRECTIONS), method=_choice("method", values["method"], METHODS),
            pruner=_choice("pruner", values["pruner"], PRUNERS),
            pruner_warmup_epochs=_int("pruner_warmup_epochs", values["pruner_warmup_epochs"], 0, 100_000),
            pruner_startup_trials=_int("pruner_startup_trials", values["pruner_startup_trials"], 0, MAX_TRIALS),
            grid_points=_int("grid_points", values["grid_points"], 2, MAX_GRID_POINTS),
            trials=_int("trials", values["trials"], 1, MAX_TRIALS),
            time_limit=None if values["time_limit"] is None else _number("time_limit", values["time_limit"]),
            parallel=_int("parallel", values["parallel"], 1, MAX_PARALLEL),
            seed=None if values["seed"] is None else _int("seed", values["seed"], 0, 2**31 - 1),
            hosts=_hosts(values["hosts"]), gpus_per_trial=_int("gpus_per_trial", values["gpus_per_trial"], 1, 64),
            pruner_threshold=_threshold(values["pruner"], values["pruner_threshold"]),
            slurm=None if values["slurm"] is None else SweepSlurm.from_dict(values["slurm"]))
        if metric.startswith("val_") and base.dataset.validation == "none":
            fail("metric", f"{metric} needs validation, but base.dataset.validation is 'none'")
        if sweep.slurm is not None:
            check_slurm_sweep(sweep.base, sweep.hosts, data)
        return sweep

    def to_dict(self) -> dict[str, Any]:
        return {"base": self.base.to_dict(), "parameters": {p.key: p.to_dict() for p in self.parameters},
                **{key: getattr(self, key) for key in _DEFAULTS}, "hosts": list(self.hosts),
                "slurm": None if self.slurm is None else self.slurm.to_dict()}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    # ---- what the engine asks ------------------------------------------------------------
    def trial_config(self, values: dict[str, Any]) -> RunConfig:
        """The run configuration of one trial: the base with ``values`` (dotted keys) set."""
        return set_keys(self.base, values)

    def grid_space(self) -> dict[str, list[Any]]:
        return {p.key: p.grid(self.grid_points) for p in self.parameters}

    def grid_size(self) -> int:
        return math.prod(len(values) for values in self.grid_space().values())

    @property
    def trial_budget(self) -> int:
        """Trials to run: ``trials``, or fewer when a grid has fewer points."""
        return min(self.trials, self.grid_size()) if self.method == "grid" else self.trials


def _name(key: Any) -> str:
    return key if isinstance(key, str) and key.isidentifier() and len(key) <= 40 else show(key)


def _choice(key: str, value: Any, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        fail(key, f"must be one of {', '.join(allowed)}; got {show(value)}")
    return value


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _number(key: str, value: Any) -> float:
    if not _is_number(value) or not value > 0:
        fail(key, f"must be a number of seconds > 0 or null; got {show(value)}")
    return float(value)


def _int(key: str, value: Any, low: int, high: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        fail(key, f"must be an integer in [{low}, {high}]; got {show(value)}")
    return value


def _threshold(pruner: Any, value: Any) -> float | None:
    """The threshold pruner's figure: needed by it, refused without it (it would be ignored)."""
    if pruner != "threshold":
        if value is not None:
            fail("pruner_threshold", f'only with "pruner": "threshold"; got pruner {show(pruner)}')
        return None
    if not _is_number(value):
        fail("pruner_threshold", f"the threshold pruner needs the metric a trial must reach (a number); "
                                 f"got {show(value)}")
    return float(value)


def _hosts(value: Any) -> tuple[str, ...]:
    """Where trials run: "local" and SSH destinations as ``--host`` takes them (core/ssh_hosts.py)."""
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        fail("hosts", f'must be a non-empty list of "{LOCAL}" (this machine) and SSH hosts; got {show(value)}')
    if len(set(value)) != len(value):
        fail("hosts", f"names a host twice: {show(value)}")
    for name in value:
        if name != LOCAL:
            try:
                Host(name)
            except ValueError as exc:
                fail("hosts", str(exc).removeprefix("host: "))
    return tuple(value)


def _parameters(base: RunConfig, data: Any) -> tuple[Parameter, ...]:
    if not isinstance(data, dict) or not data:
        fail("parameters", "must be an object with at least one key to vary, e.g. "
                           '{"training.learning_rate": {"log_uniform": [0.0001, 0.1]}}')
    known = config_keys()
    return tuple(_parameter(base, key, spec, known) for key, spec in data.items())


def _parameter(base: RunConfig, key: str, spec: Any, known: frozenset[str]) -> Parameter:
    where = f"parameters.{key}" if len(key) <= 60 else f"parameters.{show(key)}"
    if key not in known:
        fail(where, f"not a run configuration key{did_you_mean(key, known)} (section.key, as in docs/config.md)")
    if not isinstance(spec, dict) or len(spec) != 1 or next(iter(spec)) not in KINDS:
        fail(where, f"must be one of {', '.join('{%s: ...}' % kind for kind in KINDS)}; got {show(spec)}")
    kind, values = next(iter(spec.items()))
    where = f"{where}.{kind}"
    if kind == "choice":
        if not isinstance(values, list) or not values:
            fail(where, f"must be a non-empty list of values; got {show(values)}")
        if any(isinstance(v, (dict, list)) for v in values) or len({json.dumps(v) for v in values}) != len(values):
            fail(where, f"must list distinct numbers, strings or booleans; got {show(values)}")
    else:
        if not isinstance(values, list) or len(values) != 2 or not all(_is_number(v) for v in values):
            fail(where, f"must be [low, high]; got {show(values)}")
        low, high = values
        if kind == "int" and not all(isinstance(v, int) for v in values):
            fail(where, f"must be two integers; got {show(values)}")
        if not low < high:
            fail(where, f"empty range: low must be below high; got {show(values)}")
        if kind == "log_uniform" and low <= 0:
            fail(where, f"a log range must lie above 0; got {show(values)}")
        if kind != "int":
            values = [float(low), float(high)]
    for value in values:  # each end and each choice must make a valid run configuration
        try:
            set_keys(base, {key: value})
        except ConfigError as exc:
            raise ConfigError(f"{where}: {show(value)} is refused: {exc}") from None
    return Parameter(key, kind, tuple(values))
