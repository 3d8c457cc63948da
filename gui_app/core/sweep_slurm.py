"""A sweep file's ``slurm`` key: each trial runs as one Slurm job (docs/sweeps.md, "Trials as
Slurm jobs"). What the key holds is what ``submit --slurm`` asks of Slurm (its sbatch options,
gui_app/engine/schedulers/slurm/script.py); validated here like the rest of the sweep file, each
mistake one line naming the key (``slurm.cpus_per_task: ...``). TensorFlow-free, Optuna-free.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from gui_app.core.config import RunConfig
from gui_app.core.config_json import did_you_mean, fail, show

MAX_SIGNAL_S = 3600
_TIME = re.compile(r"^(\d+-)?\d+(:\d{1,2}){0,2}$")  # Slurm's time formats: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S
_WORD = re.compile(r"^[A-Za-z0-9_.,:@+=/-]{1,200}$")  # a partition or account: no spaces, no newlines


@dataclass(frozen=True)
class SweepSlurm:
    """What each trial's job asks of Slurm; None leaves it to the cluster's defaults."""

    partition: str | None = None
    time: str | None = None  # a trial's time limit: near it the trial checkpoints and its job requeues
    account: str | None = None
    cpus_per_task: int | None = None
    gpus_per_node: int | None = None
    signal_seconds: int | None = None  # None: submit's default (120 s before the time limit)
    sbatch: tuple[str, ...] = ()  # more #SBATCH lines, e.g. "--qos=long"

    @classmethod
    def from_dict(cls, data: Any) -> SweepSlurm:
        if not isinstance(data, dict):
            fail("slurm", 'must be an object of sbatch options (may be empty: {}) or null; '
                          f"got {show(data)}")
        known = [f for f in cls.__dataclass_fields__]
        unknown = sorted(set(data) - set(known))
        if unknown:
            fail(f"slurm.{unknown[0]}" if isinstance(unknown[0], str) and len(unknown[0]) < 40 else "slurm",
                 f"unknown key{did_you_mean(unknown[0], known)} (known keys: {', '.join(known)})")
        return cls(partition=_word("partition", data.get("partition")), time=_time(data.get("time")),
                   account=_word("account", data.get("account")),
                   cpus_per_task=_count("cpus_per_task", data.get("cpus_per_task"), 1, 4096),
                   gpus_per_node=_count("gpus_per_node", data.get("gpus_per_node"), 0, 64),
                   signal_seconds=_count("signal_seconds", data.get("signal_seconds"), 0, MAX_SIGNAL_S),
                   sbatch=_lines(data.get("sbatch", [])))

    def to_dict(self) -> dict[str, Any]:
        return {"partition": self.partition, "time": self.time, "account": self.account,
                "cpus_per_task": self.cpus_per_task, "gpus_per_node": self.gpus_per_node,
                "signal_seconds": self.signal_seconds, "sbatch": list(self.sbatch)}


def check_slurm_sweep(base: RunConfig, hosts: tuple[str, ...], data: dict) -> None:
    """A Slurm sweep's other keys: its trials run where Slurm puts them (not on ``hosts``), as
    the one kind of run a Slurm job runs (``submit --slurm``: multi_worker_mirrored, one task per
    node; ``strategy.workers`` nodes a trial)."""
    if "hosts" in data and hosts != ("local",):
        fail("hosts", "the trials run as Slurm jobs (slurm is set): Slurm places them, leave hosts out")
    if data.get("gpus_per_trial", 1) != 1:  # (the folder's copy of the file has the default)
        fail("gpus_per_trial", "the trials run as Slurm jobs (slurm is set): a trial's GPUs are "
                               "slurm.gpus_per_node on each of its strategy.workers nodes")
    if base.strategy.name != "multi_worker_mirrored":
        fail("base.strategy.name", "trials as Slurm jobs run multi_worker_mirrored (strategy.workers nodes a "
                                   f"trial, 1 for one node); got {show(base.strategy.name)}")


def _word(key: str, value: Any) -> str | None:
    if value is not None and (not isinstance(value, str) or not _WORD.match(value)):
        fail(f"slurm.{key}", f"must be a {key} name (no spaces) or null; got {show(value)}")
    return value


def _time(value: Any) -> str | None:
    if value is not None and (not isinstance(value, str) or not _TIME.match(value)):
        fail("slurm.time", f"must be Slurm's time format (minutes, H:MM:SS or D-HH:MM) or null; got {show(value)}")
    return value


def _count(key: str, value: Any, low: int, high: int) -> int | None:
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high):
        fail(f"slurm.{key}", f"must be an integer in [{low}, {high}] or null; got {show(value)}")
    return value


def _lines(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v.startswith("--") and len(v) > 2
                                              and not any(c.isspace() for c in v) for v in value):
        fail("slurm.sbatch", f'must be a list of sbatch options, each "--name=value" or "--flag"; got {show(value)}')
    return tuple(value)
