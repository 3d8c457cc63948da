"""The engine's errors and how a failure is told: one line and an exit code.

Every command ends a failure the same way (``train``, ``resume``, ``evaluate`` and the cluster's
``worker``): :func:`classify` gives the ``error`` event's kind and the exit code, :func:`one_line`
the message, with advice where we have some (out of memory, a full disk).
"""
from __future__ import annotations

from pathlib import Path

from gui_app.core.config import ConfigError
from gui_app.core.disk import DiskError, disk_full_message, is_disk_full
from gui_app.core.run_lock import RunInUse
from gui_app.engine.exits import EXIT_BAD_INPUT, EXIT_FAILED


class InputError(ValueError):
    """Bad input (dataset, model file) detected while setting up: exit code 2."""


class TrainingDiverged(RuntimeError):
    """The loss became NaN or infinite."""


def one_line(exc: BaseException, run_dir: Path | None = None, hints: dict | None = None) -> str:
    if is_disk_full(exc):
        return disk_full_message(run_dir)  # before the OOM wording: TF reports ENOSPC as ResourceExhausted
    text = str(exc).strip()
    if type(exc).__module__.startswith("tensorflow"):
        # TensorFlow errors carry the op and a graph trace after the first line.
        name = type(exc).__name__
        text = f"{name}: {text.splitlines()[0] if text else ''}"
        if name == "ResourceExhaustedError":
            text = out_of_memory(text, run_dir, hints or {})
    return text.splitlines()[0] if text else type(exc).__name__


def out_of_memory(text: str, run_dir: Path | None, hints: dict) -> str:
    per_replica, replicas = hints.get("per_replica_batch"), hints.get("replicas")
    if not per_replica:
        return "out of memory: " + text + " (try a smaller training.global_batch_size)"
    smaller = max(replicas or 1, (per_replica // 2) * (replicas or 1))
    how = f"; resume with --set training.global_batch_size={smaller}" if run_dir else ""
    return (f"out of memory with {per_replica} examples per replica: {text} (try a smaller "
            f"training.global_batch_size, e.g. {smaller}{how}; the last checkpoint is kept)")


def classify(exc: BaseException) -> tuple[str, int]:
    if isinstance(exc, ConfigError):
        return "config", EXIT_BAD_INPUT
    if getattr(exc, "event_kind", None):  # e.g. a failed cluster (engine/cluster/launcher.py)
        return exc.event_kind, exc.exit_code
    if isinstance(exc, (InputError, RunInUse, DiskError)):
        return "input", EXIT_BAD_INPUT
    if is_disk_full(exc):
        return "disk", EXIT_FAILED
    if isinstance(exc, TrainingDiverged) or type(exc).__module__.startswith("tensorflow"):
        return "training", EXIT_FAILED
    return "internal", EXIT_FAILED
