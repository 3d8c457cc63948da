"""What every scheduler's engine side shares: its own commands as ``submit`` runs them
(``sbatch``, ``kubectl``): found on PATH, given a time limit, no stdin, and a refusal told as one
line -- the command's own last line on stderr, which is where both say why; and, for ``stop`` and
``resume``, the run's job record read from its backend and a refusal said as one line."""
from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar, Protocol, TypeVar

from gui_app.core.backends.base import JobState, ScheduledBackend
from gui_app.engine.run.exits import say

Job = TypeVar("Job")
Job_co = TypeVar("Job_co", covariant=True)


class SubmitError(Exception):
    """The scheduler's command is missing, did not answer, or refused: one line."""


def find(program: str, hint: str) -> str:
    """``program``'s path on PATH; SubmitError saying ``hint`` (what to install or where to be)."""
    path = shutil.which(program)
    if path is None:
        raise SubmitError(f"{program}: not found on PATH ({hint})")
    return path


def run(program: str, args: list[str], *, hint: str, timeout: float, silent: str, cwd: Path | None = None,
        env: dict[str, str] | None = None) -> str:
    """Run ``program ARGS`` (in ``env``, default ours); its stdout, or SubmitError: missing
    (``hint``), no answer within ``timeout`` seconds (``silent`` says who does not answer), or its
    own last stderr line."""
    command = [find(program, hint), *args]
    try:
        done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL, env=env)
    except subprocess.TimeoutExpired:
        raise SubmitError(f"{program}: no answer within {timeout:.0f} s ({silent})") from None
    if done.returncode != 0:
        said = [line for line in done.stderr.splitlines() if line.strip()]
        raise SubmitError(said[-1] if said else f"{program} {args[0]}: exit code {done.returncode}")
    return done.stdout


class Recorded(Protocol[Job_co]):
    """A scheduler's backend (gui_app/core/backends): its record's file and the record it keeps."""

    RECORD: ClassVar[str]
    run_dir: Path

    def record(self) -> Job_co | None: ...


def record(backend: Recorded[Job]) -> Job:
    """The run's job as its scheduler's record keeps it; OSError when the record is gone or
    unreadable (the backend was chosen by it: gone since is a bad run directory)."""
    job = backend.record()
    if job is None:
        raise OSError(f"{backend.run_dir / backend.RECORD}: missing or unreadable")
    return job


Scheduled = TypeVar("Scheduled", bound=ScheduledBackend)


def may_resume(backend: Scheduled, current: Callable[[Scheduled], tuple[str, JobState]]) -> bool:
    """Whether ``resume`` may submit the run again: its record is readable and its job
    (``current``: its scheduler's module's) no longer runs it, nor has the run completed
    (:meth:`~gui_app.core.backends.base.ScheduledBackend.resume_refusal`); else it says why not."""
    try:
        job, state = current(backend)
    except OSError as exc:
        say("resume", str(exc))
        return False
    why = backend.resume_refusal(job, state)
    if why is not None:
        say("resume", why)
        return False
    return True
