"""One trial's engine process: started detached, followed through its run directory's events,
stopped with a checkpoint.

A trial is an ordinary ``replica-studio train`` (later ``resume``) in a session of its own, its
stdin on /dev/null and its output in the sweep folder, so it outlives the sweep's process: a
killed sweep finds it again by its run directory's lock (gui_app/core/run_lock.py).
"""
from __future__ import annotations

import os
import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from gui_app.core import rundir
from gui_app.core.events import Continued, EpochEnd, Eval, Paused, RunFinished, RunStarted, decode_line
from gui_app.core.run_lock import holder as run_holder
from gui_app.engine import control_channel
from gui_app.engine.sweep.folder import SweepFolder, TrialRecord
from gui_app.identity import app_command, app_env

if TYPE_CHECKING:
    import optuna  # (only the sweep's loop imports it: `sweep stop` need not pay for it)


def start(folder: SweepFolder, number: int, record: TrialRecord, args: list[str]) -> subprocess.Popen:
    """Start ``replica-studio ARGS`` for trial ``number`` (on the record's SSH host with ``--host``:
    this process is then the connection, and its end stops the run there with a checkpoint):
    events to ``trials/N.jsonl``, its log to ``trials/N.log`` (both appended: a resumed trial adds
    to them)."""
    extra = {"TF_CPP_MIN_LOG_LEVEL": "2"}
    if record.device is not None:
        extra["CUDA_VISIBLE_DEVICES"] = record.device
    with folder.trial_file(number, ".jsonl").open("ab") as out, folder.trial_file(number, ".log").open("ab") as log:
        there = ["--host", record.host] if record.host else []
        process = subprocess.Popen(app_command(*args, "--events", "jsonl", *there), stdin=subprocess.DEVNULL,
                                   stdout=out, stderr=log, env=app_env(extra), start_new_session=True)
    record.pid = process.pid
    return process


def stop_run(pid: int | None) -> None:
    """Ask a trial's run to stop with a checkpoint: SIGTERM acts as a ``stop`` line
    (engine/control.py). The one place a sweep stops a run."""
    if pid is None:
        return
    try:
        os.kill(pid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):  # gone already (or the pid is another user's now)
        pass


def continue_run(run_dir: Path) -> None:
    """Let a trial held at an epoch's end (``--pause-after-each-epoch``) go on to its next epoch."""
    try:
        control_channel.send(run_dir, "continue")
    except control_channel.ChannelError:  # (NotRunning too) gone meanwhile: its end is read next
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
    """What a trial's run directory says so far: read from where it was last read, one complete
    line at a time (a resumed run appends; its replayed epochs replace the earlier ones). A
    resume replaces the file by its lines up to the checkpoint (core/events_file.py): a new file
    is read again from its start."""

    run_dir: Path
    events: Path | None = None  # where its events are read, when not in run_dir (a run on an SSH host)
    offset: int = 0
    epochs: dict[int, EpochEnd] = field(default_factory=dict)
    test_accuracy: float | None = None
    finished: RunFinished | None = None  # the last run_finished after the last run_started
    paused_at: int | None = None  # the step it is paused at (``--pause-after-each-epoch``), None while it runs
    starts: int = 0  # run_started lines read: its processes so far (train, then each resume)
    _file: int | None = None  # the inode read from

    def read(self) -> list[EpochEnd]:
        """Fold what was appended since the last read; returns the epochs that ended in it."""
        try:
            with (self.events or self.run_dir / rundir.EVENTS_FILE).open("rb") as f:
                inode = os.fstat(f.fileno()).st_ino
                if inode != self._file:  # the first read, or a resume replaced the file
                    self._file, self.offset, self.starts, self.epochs = inode, 0, 0, {}
                f.seek(self.offset)
                data = f.read()
        except OSError:
            return []
        end = data.rfind(b"\n") + 1  # a line being written is read next time
        self.offset += end
        ended = []
        for line in data[:end].splitlines():
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
    process: subprocess.Popen | None = None  # started by this process; else found again by its run's lock
    run: TrialRun | None = None
    pruned_at: int | None = None
    reported: set[int] = field(default_factory=set)
    earlier_starts: int = 0  # run_started lines its run had before the process the sweep follows
    continued: tuple[int, int | None] | None = None  # the pause it was last told to continue: (run starts, step)

    @property
    def finished(self) -> RunFinished | None:
        """How the followed process ended its run: not the run_finished of an earlier process
        (a resumed trial's stop), which its file still holds until its new run_started."""
        run = self.run
        return run.finished if run is not None and run.starts > self.earlier_starts else None

    def alive(self) -> bool:
        if self.process is not None:
            return self.process.poll() is None  # (also reaps it)
        # found again: the process holding its run directory, or (before it has one, or on an SSH
        # host) the process last started for it
        return live_pid(str(self.run.run_dir) if self.run is not None else None, self.record) is not None
