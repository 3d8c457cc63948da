"""The engine's errors and how a failure is told: one line and an exit code.

Every command ends a failure the same way (``train``, ``resume``, ``evaluate`` and the cluster's
``worker``): :func:`classify` gives the ``error`` event's kind and the exit code, :func:`one_line`
the message, with advice where we have some (out of memory, a full disk).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gui_app.core.config import ConfigError
from gui_app.core.disk import DiskError, disk_full_message, is_disk_full
from gui_app.core.messages import first_line, typed_line
from gui_app.core.run_lock import RunInUse
from gui_app.core.wording import ref
from gui_app.engine.run.exits import EXIT_BAD_INPUT, EXIT_FAILED


class InputError(ValueError):
    """Bad input (dataset, model file) detected while setting up: exit code 2."""


class TrainingDiverged(RuntimeError):
    """The loss became NaN or infinite."""


class JoinTimeout(RuntimeError):
    """Some workers of a cluster never became reachable within ``strategy.join_timeout_s``."""


class ClusterFailed(RuntimeError):
    """A cluster run failed: a worker or ps died, or the cluster never formed. ``kind`` is the
    ``error`` event's kind; a failed cluster (kind ``cluster``) is resumable: ``resume``
    restarts the whole cluster from the last checkpoint."""

    def __init__(self, message: str, step: int, kind: str = "cluster", exit_code: int = EXIT_FAILED):
        super().__init__(message)
        self.step, self.kind, self.exit_code = step, kind, exit_code
        self.resumable = kind == "cluster"


@dataclass(frozen=True)
class BatchShape:
    """How a run splits its global batch: what an out-of-memory message advises on."""

    per_replica: int
    replicas: int


def one_line(exc: BaseException, run_dir: Path | None = None, batch: BatchShape | None = None) -> str:
    if is_disk_full(exc):
        return disk_full_message(run_dir)  # before the OOM wording: TF reports ENOSPC as ResourceExhausted
    if type(exc).__module__.startswith("tensorflow"):  # its type says what failed
        text = typed_line(exc)
        return out_of_memory(text, run_dir, batch) if type(exc).__name__ == "ResourceExhaustedError" else text
    return first_line(exc)


def out_of_memory(text: str, run_dir: Path | None, batch: BatchShape | None) -> str:
    """The advice names the batch as the form does, with the key and the resume command for the
    command line (the window shows it without them: gui_app.core.wording.for_people)."""
    if batch is None:
        return f"out of memory: {text} (try a smaller {ref('training.global_batch_size')})"
    smaller = max(batch.replicas, (batch.per_replica // 2) * batch.replicas)
    how = f"; resume with --set training.global_batch_size={smaller}" if run_dir else ""
    return (f"out of memory with {batch.per_replica} examples per replica: {text} (try a smaller "
            f"{ref('training.global_batch_size')}, e.g. {smaller}; the last checkpoint is kept{how})")


def classify(exc: BaseException) -> tuple[str, int]:
    """(the ``error`` event's kind, the exit code) of a failure."""
    if isinstance(exc, ConfigError):
        return "config", EXIT_BAD_INPUT
    if isinstance(exc, ClusterFailed):
        return exc.kind, exc.exit_code
    if isinstance(exc, JoinTimeout):
        return "cluster", EXIT_FAILED
    if isinstance(exc, (InputError, RunInUse, DiskError)):
        return "input", EXIT_BAD_INPUT
    if is_disk_full(exc):
        return "disk", EXIT_FAILED
    if isinstance(exc, TrainingDiverged) or type(exc).__module__.startswith("tensorflow"):
        return "training", EXIT_FAILED
    return "internal", EXIT_FAILED
