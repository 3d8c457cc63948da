"""What every run backend shares: the run backend itself, a scheduler's job state, and the small
plumbing each scheduler's own module uses (asking its command line, keeping its record).

A run backend (:class:`RunBackend`) answers, for one run directory, the questions ``attach``,
``stop``, ``resume``, ``log``, ``runs`` and the window ask of "where the run lives": whether it may
still go on (:meth:`~RunBackend.active`), what its scheduler says of it (:meth:`~RunBackend.state`),
its events and its log as they are written (:meth:`~RunBackend.follow`, :meth:`~RunBackend.log`,
gui_app/core/line_follow.py), whether a stop goes to the scheduler rather than the run's control
channel, and why it ended or cannot be resumed. gui_app/core/backends/__init__.py decides once which
backend a run has. The scheduler's own words (squeue, kubectl) stay in gui_app/core/backends/slurm.py and
gui_app/core/backends/kubernetes.py. TensorFlow-free, Qt-free.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from gui_app.core import atomic_io, run_lock, rundir
from gui_app.core.events_follow import EventsFollower
from gui_app.core.line_follow import LineFollower

UNKNOWN = "UNKNOWN"  # a scheduler that could not be asked: never an exception, never "active"
ENDED_BY_EVENTS = frozenset({"completed", "stopped", "failed"})  # a run_finished says more than its job's end
WATCH_SECONDS = 2.0  # a job that ended is seen this late at most (the run_finished comes before it)


@dataclass(frozen=True)
class JobState:
    """A scheduler's word on a run's job; each scheduler's subclass names itself and its active states."""

    scheduler: ClassVar[str] = ""  # who the state is from (the run list's tooltip)
    ACTIVE: ClassVar[frozenset[str]] = frozenset()  # the states in which the job may still run the run
    state: str  # the scheduler's word (PENDING, RUNNING, CANCELLED, ...) or UNKNOWN
    reason: str = ""  # why it waits (Resources, Priority, pods starting, ...)

    @property
    def active(self) -> bool:
        return self.state in self.ACTIVE

    def describe(self) -> str:
        """For people: "pending (Resources)", "running", "cancelled"."""
        word = self.state.lower().replace("_", " ")
        return f"{word} ({self.reason})" if self.reason and self.state == "PENDING" else word


def run_status(events_status: str, state: JobState | None) -> str:
    """A run's status where no process here runs it, from its events' status and its job's state
    (None: no scheduler runs it): the job's while it may still run it ("pending (Resources)",
    "running", "requeued"); the scheduler's word for an end the events do not tell (no run_finished:
    "cancelled", "failed", "timeout", "node fail"); else the events'. A job that completed
    without its run's run_finished completed nothing: the events' word stays ("interrupted")."""
    if state is not None and (state.active or (events_status not in ENDED_BY_EVENTS
                                               and state.state not in (UNKNOWN, "COMPLETED"))):
        return state.describe()
    return events_status


def _run(command: list[str], timeout: float) -> subprocess.CompletedProcess[str] | None:
    """Run a scheduler command found on PATH, no stdin; None when it is not there
    (subprocess.TimeoutExpired when it does not answer within ``timeout`` seconds)."""
    program = shutil.which(command[0])
    if program is None:
        return None
    return subprocess.run([program, *command[1:]], capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def ask(command: list[str], timeout: float, *, any_exit: bool = False) -> str | None:
    """A scheduler command's stdout; None when it is missing, does not answer, or fails (unless
    ``any_exit``: squeue and sacct exit 1 and still say something on stdout)."""
    try:
        done = _run(command, timeout)
    except (subprocess.TimeoutExpired, OSError):
        return None
    return done.stdout if done is not None and (any_exit or done.returncode == 0) else None


def tell(command: list[str], timeout: float, *, name: str, missing: str, no_answer: str) -> str | None:
    """Run a scheduler command that changes something (scancel, kubectl delete): None once it
    took it, else the one line why not (its last line on stderr)."""
    try:
        done = _run(command, timeout)
    except subprocess.TimeoutExpired:
        return no_answer
    if done is None:
        return missing
    said = [line for line in done.stderr.splitlines() if line.strip()]
    return None if done.returncode == 0 else (said[-1] if said else f"{name}: exit code {done.returncode}")


def write_record(run_dir: str | Path, name: str, value: dict[str, Any]) -> None:
    """A scheduler's record of the run's job, written atomically (a reader never sees half of it)."""
    atomic_io.write_text(Path(run_dir) / name, json.dumps(value) + "\n")


def read_record(run_dir: str | Path, name: str) -> dict[str, Any] | None:
    """The record; None when there is none or it is unreadable (the run is not that scheduler's)."""
    try:
        value = json.loads((Path(run_dir) / name).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


class RunBackend:
    """Where a run lives: what every backend answers. ``run_dir`` is a path where the run lives
    (on an SSH host: a path there); an engine command about the run runs there too."""

    kind: ClassVar[str] = ""
    remote: ClassVar[bool] = False  # its files are not on this machine: only engine commands reach them
    scheduled: ClassVar[bool] = False  # a scheduler runs it, not a process here

    def __init__(self, run_dir: str | Path) -> None:
        self.run_dir = Path(run_dir)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.run_dir)!r})"

    def command(self, engine_command: Callable[..., list[str]], args: Sequence[str],
                connect_timeout: int | None = None) -> list[str]:
        """The command line that runs the engine command ``args`` where the run lives
        (``engine_command``: how this process starts the engine here)."""
        return engine_command(*args)

    def prepare(self) -> None:
        """Ask now what building :meth:`command` would otherwise wait for (a process: an SSH
        host's ``ssh -G``), on a thread that may wait; nothing for a run here."""


class HereBackend(RunBackend):
    """A run whose files are on this machine and which a process here runs (``train``,
    ``resume``, a detached run: its lock and its control channel); the schedulers' backends
    change what differs."""

    kind: ClassVar[str] = "here"

    # ---- what the scheduler says (none here) ----------------------------------------------------
    def job(self) -> tuple[str, JobState] | None:
        """Its job's id (or name) and state; None for a run no scheduler runs."""
        return None

    def state(self) -> JobState | None:
        job = self.job()
        return None if job is None else job[1]

    def job_active(self) -> bool:
        """Its scheduler may still run it (pending, running, requeued...)."""
        state = self.state()
        return state is not None and state.active

    def active(self) -> bool:
        """It may still go on: a process holds its lock, or its job is active."""
        return run_lock.holder(self.run_dir) is not None or self.job_active()

    def job_watch(self, every_s: float = WATCH_SECONDS) -> JobWatch:
        """:meth:`job_active`, asked at most every ``every_s`` (a follower looks four times a second)."""
        return JobWatch(self, every_s)

    # ---- its files ------------------------------------------------------------------------------
    def follow(self, from_line: int = 0, from_byte: int = 0) -> EventsFollower:
        """Its events from line ``from_line`` (counted from byte ``from_byte``, a line's start)."""
        return EventsFollower(self.run_dir, from_line, from_byte)

    def log_path(self) -> Path:
        return self.run_dir / rundir.LOG_FILE

    def log(self, from_byte: int = 0) -> LineFollower:
        return LineFollower(self.log_path(), start_byte=from_byte)

    # ---- stop and resume ------------------------------------------------------------------------
    def by_scheduler(self) -> bool:
        """A stop goes to its scheduler: no process here reads its control channel."""
        return False

    def resubmits(self) -> bool:
        """A resume submits it to its scheduler again (what it was submitted with is there)."""
        return False

    def cancel(self) -> str | None:
        """Hand a stop to its scheduler: None once it took it, else the one line why not."""
        return f"{self.run_dir}: no scheduler runs it"

    def ending(self, stopping: bool) -> tuple[str, str] | None:
        """(status, message) of a scheduled run whose job ended before its run finished; None here."""
        return None


class ScheduledBackend(HereBackend):
    """A run a scheduler runs, not a process here: its job's record is in the run directory, and
    whether the run goes on is the scheduler's word. A scheduler's module names its record and
    its words; this is what they all do alike."""

    scheduled: ClassVar[bool] = True
    RECORD: ClassVar[str]  # its record's file in the run directory
    REMOVED: ClassVar[frozenset[str]]  # what a Stop leaves of a job that had not started yet
    watched: ClassVar[bool] = True  # a follower asks the scheduler itself (Kubernetes: its copy tells)

    @classmethod
    def holds(cls, run_dir: str | Path) -> bool:
        """The run is this scheduler's: its record is there and readable."""
        raise NotImplementedError

    @classmethod
    def jobs(cls, run_dirs: list[Path]) -> dict[str, tuple[str, JobState]]:
        """``{run_dir: (job, state)}`` of this scheduler's runs among ``run_dirs``: one question for many."""
        raise NotImplementedError

    def job(self) -> tuple[str, JobState] | None:
        return type(self).jobs([self.run_dir]).get(str(self.run_dir))

    def by_scheduler(self) -> bool:
        return True

    def ending(self, stopping: bool) -> tuple[str, str] | None:
        """"stopped" when a Stop removed the job before its run started (scancel, kubectl delete),
        else "failed" with the job's state; None when it has no job."""
        job = self.job()
        if job is None:
            return None
        name, state = f"{job[1].scheduler} job {job[0]}", job[1]
        if stopping and state.state in self.REMOVED:
            return "stopped", f"{name} was {state.describe()}"
        return "failed", f"{name} ended ({state.describe()}) without finishing the run"

    def resume_refusal(self, job: str, state: JobState) -> str | None:
        """Why ``resume`` cannot submit it again now (None: it can): its job still runs it, or the
        run has completed."""
        if state.active:
            return (f"{self.run_dir} is still {state.scheduler} job {job} ({state.describe()}); stop it first with "
                    f"'replica-studio stop {self.run_dir}'")
        if rundir.read_run(self.run_dir).status == "completed":
            return f"{self.run_dir} has completed; nothing to continue"
        return None


class JobWatch:
    """Whether a run's job is active, asked of its scheduler at most every ``every_s`` (squeue is
    a round trip to slurmctld). Never active for a run no scheduler runs."""

    def __init__(self, backend: HereBackend, every_s: float = WATCH_SECONDS) -> None:
        self._backend, self._every = backend, every_s
        self._watched = isinstance(backend, ScheduledBackend) and backend.watched
        self._active, self._next = False, 0.0

    def active(self) -> bool:
        if self._watched and time.monotonic() >= self._next:
            self._active = self._backend.job_active()  # the record again: a resume submits a new job
            self._next = time.monotonic() + self._every
        return self._active
