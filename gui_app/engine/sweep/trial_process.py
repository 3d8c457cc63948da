"""One trial's engine process: an ordinary detached run (engine/run/process.py), started,
followed through its run directory's events and stopped with a checkpoint like any run.

A trial is ``replica-studio train --detach`` (later ``resume --detach``): ``runs``, ``attach``,
``stop`` and the window see it as any run. What the ``--detach`` process prints (the run
directory) is appended to ``trials/N.run``, its error line, when the run ends before it starts,
to ``trials/N.log``; the run logs to its own ``engine.log``. It outlives the sweep's process: a
killed sweep finds it again by its run directory's lock (gui_app/core/run_lock.py).

A trial on an SSH host is ``train --host H --detach`` as well (its run directory is there); it
is followed through ``attach --host H`` (its output in ``trials/N.jsonl``) and stopped with
``stop --host H``. A trial of a Slurm sweep is a batch job instead (slurm_trials.py).
"""
from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from gui_app.core.events import Continued, EpochEnd, Eval, Paused, RunFinished, RunStarted, decode_line
from gui_app.core.events_follow import EventsFollower
from gui_app.core.run_lock import holder as run_holder
from gui_app.engine.run import process as run_process
from gui_app.engine.run.control_fifo import ChannelError
from gui_app.engine.sweep.folder import SweepFolder, TrialRecord
from gui_app.identity import app_command, app_env

if TYPE_CHECKING:
    import optuna  # (only the sweep's loop imports it: `sweep stop` need not pay for it)

TRIAL_ENV = {"TF_CPP_MIN_LOG_LEVEL": "2"}


def start(folder: SweepFolder, number: int, record: TrialRecord, args: list[str]) -> run_process.Starting:
    """Start ``replica-studio ARGS --detach`` for trial ``number``, here or on the record's SSH
    host; :meth:`Starting.poll` answers its run directory once the run has started."""
    extra = dict(TRIAL_ENV)
    if record.device is not None:
        extra["CUDA_VISIBLE_DEVICES"] = record.device
    starting = run_process.start(args, out=folder.trial_file(number, ".run"), log=folder.trial_file(number, ".log"),
                                 host=record.host, env=extra)
    record.pid = starting.pid  # then the run's own process (here), or its attachment (there)
    return starting


def follow_there(folder: SweepFolder, number: int, record: TrialRecord, run_dir: str) -> subprocess.Popen:
    """Follow a run on an SSH host from here: ``attach --host H RUN_DIR --control none``, its
    events (the run's whole history, then live) in a fresh ``trials/N.jsonl``; it ends when the
    run does."""
    assert record.host is not None
    with folder.trial_file(number, ".jsonl").open("wb") as out, folder.trial_file(number, ".log").open("ab") as log:
        process = subprocess.Popen(app_command("attach", run_dir, "--control", "none", "--host", record.host),
                                   stdin=subprocess.DEVNULL, stdout=out, stderr=log, env=app_env(TRIAL_ENV),
                                   start_new_session=True)
    record.pid = process.pid
    return process


def stop(run_dir: str | Path | None, record: TrialRecord) -> None:
    """Ask a trial's run to stop with a checkpoint, through its control channel (here, or with
    ``stop --host`` there); a run still starting is asked once it has. The one place a sweep
    stops a run."""
    if run_dir is not None:
        run_process.stop(run_dir, record.host)


def continue_run(run_dir: Path) -> None:
    """Let a trial held at an epoch's end (``--pause-after-each-epoch``) go on to its next epoch."""
    try:
        run_process.send(run_dir, "continue")
    except ChannelError:  # gone meanwhile, or not ours: its end is read next
        pass


def pid_alive(pid: int | None) -> bool:
    if pid is None:
        return False
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, PermissionError):  # gone (or someone else's process has that number now)
        return False
    return True


def live_pid(run_dir: str | None, record: TrialRecord) -> int | None:
    """The process working on a trial now: the one holding its run directory, or, before the
    run has one (or for a run on an SSH host: its connection), the process the sweep last
    started for it; None when none is."""
    if run_dir is not None and record.host is None:
        holder = run_holder(run_dir)
        return None if holder is None else holder if holder > 0 else record.pid
    return record.pid if pid_alive(record.pid) else None


def gpu_devices() -> list[str]:
    """The GPUs a trial may be given one of, by ``CUDA_VISIBLE_DEVICES``: those already visible to
    the sweep, else every card NVML sees; none on a machine without NVIDIA GPUs (or NVML)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return [d.strip() for d in visible.split(",") if d.strip() and d.strip() != "-1"]
    from gui_app.core.gpu_monitor import read_gpus

    return [str(sample.index) for sample in read_gpus() or []]


def gpu_groups(gpus: list[str], per_trial: int) -> list[str]:
    """``CUDA_VISIBLE_DEVICES`` values of ``per_trial`` GPUs each ("0,1", "2,3"); GPUs left over
    by a last, smaller group stay unused (a trial's batch is planned for its group's size); all
    of them as one group when there are fewer."""
    if len(gpus) <= per_trial:
        return [",".join(gpus)] if gpus else []
    return [",".join(gpus[i:i + per_trial]) for i in range(0, len(gpus) - per_trial + 1, per_trial)]


def trial_run(folder: SweepFolder, number: int, record: TrialRecord, run_dir: str) -> TrialRun:
    """What trial ``number``'s run says: read from its run directory here, or, for a run on an
    SSH host, from its process's output here (``trials/N.jsonl``: the same events, appended by
    each resume as ``events.jsonl`` is)."""
    return TrialRun(Path(run_dir), events=folder.trial_file(number, ".jsonl") if record.host else None)


@dataclass
class TrialRun:
    """What a trial's run directory says so far, folded from its events as the run's reader
    (engine/run/process.py's :func:`follow`) hands them out: complete lines only, and a resume
    that replaces the file by its lines up to the checkpoint (core/events_file.py) hands out only
    what comes after them; its replayed epochs replace the earlier ones."""

    run_dir: Path
    events: Path | None = None  # where its events are read, when not in run_dir (a run on an SSH host)
    epochs: dict[int, EpochEnd] = field(default_factory=dict)
    test_accuracy: float | None = None
    finished: RunFinished | None = None  # the last run_finished after the last run_started
    paused_at: int | None = None  # the step it is paused at (``--pause-after-each-epoch``), None while it runs
    starts: int = 0  # run_started lines read: its processes so far (train, then each resume)
    _follower: EventsFollower | None = None

    def read(self) -> list[EpochEnd]:
        """Fold what was appended since the last read; returns the epochs that ended in it."""
        if self._follower is None:
            self._follower = run_process.follow(self.run_dir, self.events)
        ended = []
        for line in self._follower.read():
            event = decode_line(line, parts=False)
            if isinstance(event, EpochEnd):
                self.epochs[event.epoch] = event
                ended.append(event)
            elif isinstance(event, Eval):
                self.test_accuracy = event.accuracy
            elif isinstance(event, RunStarted):
                self.finished, self.paused_at = None, None
                self.starts += 1
            elif isinstance(event, Paused):
                self.paused_at = event.step
            elif isinstance(event, Continued):
                self.paused_at = None
            elif isinstance(event, RunFinished):
                self.finished = event
        return ended

    def close(self) -> None:
        """Let go of its events file, once done with the trial."""
        if self._follower is not None:
            self._follower.close()
            self._follower = None

    def metric(self, name: str) -> float | None:
        """The trial's value of ``name``: the last epoch's validation figure, or the test accuracy."""
        if name == "test_accuracy":
            return self.test_accuracy
        if not self.epochs:
            return None
        return getattr(self.epochs[max(self.epochs)], name)


@dataclass
class Active:
    """A trial the sweep follows (engine/sweep/driver.py)."""

    number: int
    trial: optuna.Trial
    record: TrialRecord
    # started by this process: its detached start, then (on an SSH host) its attachment; else
    # found again by its run's lock
    process: run_process.Starting | subprocess.Popen | None = None
    run: TrialRun | None = None
    pruned_at: int | None = None
    reported: set[int] = field(default_factory=set)
    earlier_starts: int = 0  # run_started lines its run had before the process the sweep follows
    continued: tuple[int, int | None] | None = None  # the pause it was last told to continue: (run starts, step)
    attachments: int = 0  # attachments that ended before its run there did (a dropped connection)

    @property
    def finished(self) -> RunFinished | None:
        """How the followed process ended its run: not the run_finished of an earlier process
        (a resumed trial's stop), which its file still holds until its new run_started."""
        run = self.run
        return run.finished if run is not None and run.starts > self.earlier_starts else None

    def alive(self) -> bool:
        """Whether a process still works on it: the one starting it, then the run's (the one
        holding its run directory here; on an SSH host: its connection)."""
        if isinstance(self.process, run_process.Starting):
            return self.process.process.poll() is None
        if self.process is not None:
            return self.process.poll() is None  # (also reaps it)
        return live_pid(str(self.run.run_dir) if self.run is not None else None, self.record) is not None

    def stop(self) -> None:
        """Ask its run to stop with a checkpoint (a run still starting is asked once it has)."""
        stop(self.run.run_dir if self.run is not None else None, self.record)
