"""Which runs are running now, and where: what ``replica-studio runs`` lists (and the window's
run list can show) beside each run's status.

A run is running while its ``train`` or ``resume`` process holds the run's lock: the kernel
drops a flock when its process dies, however it dies (gui_app/core/run_lock.py), so a run whose
process was killed, crashed or went down with its machine is told apart from a live one without
guessing from process ids or clocks. The process records who and where it is in
``RUN_DIR/process.json`` (written once, atomically, as it takes the run); the step it reached
and the total come from the events (the run list's summary cache, gui_app/core/rundir.py).
A run submitted to Slurm or applied to Kubernetes has no process here: its job's state says
(gui_app/core/backends/__init__.py: one squeue call, one kubectl call per namespace, for every such
run of a listing). TensorFlow-free.
"""
from __future__ import annotations

import dataclasses
import functools
import json
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from gui_app.core import atomic_io, run_lock, rundir
from gui_app.core.answers import RunRow, encode
from gui_app.core.backends import local_backend, scheduled_jobs
from gui_app.core.backends.base import JobState, run_status

PROCESS_FILE = "process.json"
WORKERS_FILE = "workers.json"  # a cluster's: each worker's process, here or on its SSH host
RUN_COMMANDS = ("train", "resume")  # the processes that run a run (evaluate and export hold the lock too)


@dataclass(frozen=True)
class RunProcess:
    """The process of a run, as it recorded itself."""

    pid: int
    host: str  # the machine it runs on (a runs folder may be shared)
    command: str  # train | resume
    detached: bool  # in a session of its own, its output in RUN_DIR/engine.log
    started: float  # Unix time


def record_process(run_dir: str | Path, command: str, detached: bool) -> RunProcess:
    """Write this process's ``process.json`` (it holds the run's lock)."""
    process = RunProcess(pid=os.getpid(), host=socket.gethostname(), command=command, detached=detached,
                         started=round(time.time(), 3))
    atomic_io.write_text(Path(run_dir) / PROCESS_FILE, json.dumps(dataclasses.asdict(process)) + "\n")
    return process


def read_process(run_dir: str | Path) -> RunProcess | None:
    """The process the run last recorded (it may be long gone); None when there is none or it is unreadable."""
    try:
        value = json.loads((Path(run_dir) / PROCESS_FILE).read_text(encoding="utf-8"))
        return RunProcess(**{f.name: value[f.name] for f in dataclasses.fields(RunProcess)})
    except (OSError, ValueError, KeyError, TypeError):
        return None


@dataclass(frozen=True)
class WorkerProcessRecord:
    """One worker of a cluster that ``train`` started, as its status reports named it: its process
    id on the machine it runs on, which is this one (``host`` None) or an SSH host (``host`` the
    hosts-file name it was started through), and that machine's own name."""

    worker: int
    pid: int
    host: str | None
    hostname: str


def record_workers(run_dir: str | Path, workers: list[WorkerProcessRecord]) -> None:
    """Write ``workers.json`` (the launcher, each time a worker of a new start first reports), so
    that whoever must signal one worker (``rehearse --worker K``) finds its process where it runs."""
    atomic_io.write_text(Path(run_dir) / WORKERS_FILE,
                         json.dumps({"workers": [dataclasses.asdict(w) for w in workers]}) + "\n")


def read_workers(run_dir: str | Path) -> dict[int, WorkerProcessRecord]:
    """The workers the cluster last recorded, by index; empty when there is no readable record."""
    try:
        value = json.loads((Path(run_dir) / WORKERS_FILE).read_text(encoding="utf-8"))
        rows = [WorkerProcessRecord(**{f.name: row[f.name] for f in dataclasses.fields(WorkerProcessRecord)})
                for row in value["workers"]]
    except (OSError, ValueError, KeyError, TypeError):
        return {}
    return {w.worker: w for w in rows}


def state_code(stat: str) -> str | None:
    """The state letter (``R``, ``S``, ``T``...) of a ``/proc/PID/stat`` line: the field after the
    command's name, which may itself hold spaces and parentheses; None when the line has none."""
    try:
        return stat.rsplit(")", 1)[1].split()[0]
    except IndexError:
        return None


def local_state_code(pid: int) -> str | None:
    """:func:`state_code` of process ``pid`` on this machine (Linux), None when unreadable."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return state_code(f.read())
    except OSError:
        return None


def live_process(run_dir: str | Path) -> RunProcess | None:
    """The run's process when one runs it now: the holder of its lock is the process it recorded.
    None when no process holds it, or another command does (evaluate, export)."""
    pid = run_lock.holder(run_dir)
    if pid is None:
        return None
    process = read_process(run_dir)
    return process if process is not None and process.pid == pid and process.command in RUN_COMMANDS else None


@dataclass
class LiveRun:
    """A run as ``runs`` lists it: its status by its events, ``running`` while its process runs it,
    and a Slurm or Kubernetes run's by its job (``run_status``: "pending (Resources)",
    "cancelled")."""

    info: rundir.RunInfo
    process: RunProcess | None
    job: tuple[str, JobState] | None = None  # a Slurm job's id or Kubernetes Job's name, its state

    @property
    def status(self) -> str:
        if self.process is not None:
            return "running"
        return run_status(self.info.status, self.job[1] if self.job is not None else None)

    def to_json(self) -> dict:
        info, process = self.info, self.process
        return encode(RunRow(
            str(info.path), info.name, self.status, info.step, info.total_steps, info.started, info.test_accuracy,
            info.message, process.pid if process else None, process.host if process else None,
            process.detached if process else None, info.config.to_dict() if info.config else None,
            info.has_model, info.resumable, self._job("Slurm"), self._job("Kubernetes"), **owner(info.path)))

    def _job(self, scheduler: str) -> str | None:
        return self.job[0] if self.job is not None and self.job[1].scheduler == scheduler else None


def owner(run_dir: str | Path) -> dict:
    """``owner``, the user the run's folder belongs to (who started it), and ``own``: whether that
    is the user asking. A shared runs folder on a host holds other users' runs too: the window's
    run list shows the user's own (gui_app/ui/window/remote_runs.py), where Resume or Stop would
    fail on another's files."""
    try:
        uid = Path(run_dir).stat().st_uid
    except OSError:
        return {"owner": None, "own": True}
    return {"owner": _user_name(uid), "own": uid == os.getuid()}


@functools.lru_cache(maxsize=64)
def _user_name(uid: int) -> str:
    """Once per user: each look-up reads the passwd database (40 µs a run of a listing here)."""
    try:
        import pwd  # POSIX only, as the runs' hosts are

        return pwd.getpwuid(uid).pw_name
    except (ImportError, KeyError):  # no pwd, or a uid without a passwd entry (a container's)
        return str(uid)


def read_live_run(run_dir: str | Path) -> LiveRun:
    return LiveRun(rundir.read_run(run_dir), live_process(run_dir), local_backend(run_dir).job())


def list_live_runs(runs_dir: str | Path) -> list[LiveRun]:
    """Every run under ``runs_dir``, newest first, with the process of each running one and the
    job of each Slurm or Kubernetes run (gui_app/core/backends/__init__.py)."""
    infos = rundir.list_runs(runs_dir)
    jobs = scheduled_jobs(info.path for info in infos)
    return [LiveRun(info, live_process(info.path), jobs.get(str(info.path))) for info in infos]
