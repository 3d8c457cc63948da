"""RunReader: reads the runs folder for the run list on its own QThread, in batches.

Listing is cheap when every run has its ``summary.json`` (1,000 runs in about 0.12 s) but a
folder of runs without one -- written by an older version, or copied in -- means reading every
``events.jsonl`` in full (1,000 runs of 1.7 MB: about 15 s). Done on the GUI thread that froze
the window before its first paint; here the window paints at once and rows arrive as they are
read.

Threading (gui_app/ui/gc_guard.py says why it matters): the only QObject on the reader's
thread is the ``_ReadWorker`` itself, moved there with ``moveToThread``; it creates no other
QObject and touches no widget. It reads with the Qt-free ``gui_app.core.rundir`` and hands
plain Python values (``RunInfo``) to the GUI thread through queued signals. Each fill has a
generation number: a newer request (a refresh while a fill runs) makes the worker drop the
older fill between two runs, and the GUI side ignores batches of any generation but the
latest, so two fills never interleave in the list. Runs submitted to Slurm or Kubernetes get
their job's state before the fill's rows (``jobs``): one squeue call per fill for all of them,
one ``kubectl get job`` per context and namespace.

The sweeps' trials are listed too (their run directories are in the sweeps' folders,
gui_app.core.sweep_runs), each named "sweep NAME trial K".

With a host (the window's Run on host), its runs are read instead of the local ones, over ssh
(gui_app.ui.window.remote_runs.read_host_rows); a host that does not answer is one line
(``host_failed``), not an error dialog.
"""
from __future__ import annotations

import dataclasses
import socket
import time
from pathlib import Path

from PySide6.QtCore import QCoreApplication, QObject, Qt, QThread, Signal, Slot

from gui_app.core.backends import kubernetes_jobs, scheduled_jobs
from gui_app.core.hosts import Host
from gui_app.core.live_runs import RunProcess, live_process, read_process
from gui_app.core.rundir import RunInfo, default_sweeps_dir, read_run, run_dirs
from gui_app.core.ssh import HostError
from gui_app.core.sweep_runs import trial_runs
from gui_app.ui.window.remote_runs import read_host_rows

BATCH_RUNS = 200  # rows handed over at most per batch: each batch costs the GUI thread a few ms
BATCH_SECONDS = 0.1  # ... and at least this often while reading (cold runs read at ~15 ms each)


class _Latest:
    """The generation the GUI wants, shared with the worker thread: a plain Python object
    (an int attribute, read and written under the GIL), so the worker's loop can see a newer
    request without waiting for its own event loop."""

    generation = 0


def read_row(path: Path) -> tuple[RunInfo, bool, RunProcess | None, str]:
    """One run, whether it can be resumed (a checkpoint check that stats the folder), the
    process running it now if any (its lock and process.json, gui_app/core/live_runs.py), and
    the machine its process ran on when that is another one (a shared runs folder), else "":
    done here, not on the GUI thread. A run folder that cannot be read still gets a row."""
    try:
        info = read_run(path)
    except OSError as exc:
        info = RunInfo(path=path, config=None, status="unreadable", message=f"cannot read the run: {exc}")
        return info, False, None, ""
    live = live_process(path)
    recorded = live or read_process(path)
    host = recorded.host if recorded is not None and recorded.host != socket.gethostname() else ""
    return info, info.resumable or kubernetes_jobs.resumable(path, info.status), live, host


class _ReadWorker(QObject):
    counted = Signal(int, int)  # generation, run folders found
    jobs = Signal(int, object)  # generation, backends.scheduled_jobs(paths): before the fill's first batch
    batch = Signal(int, object)  # generation, [read_row(path), ...]
    done = Signal(int)  # generation: every run was read (not emitted for a dropped fill)
    host_failed = Signal(int, str)  # generation, the line saying why the host's runs cannot be read

    def __init__(self, latest: _Latest) -> None:
        super().__init__()
        self._latest = latest

    @Slot(int, str, object, object)
    def read(self, generation: int, runs_dir: str, host: Host | None = None, sweeps_dir: Path | None = None) -> None:
        if generation != self._latest.generation:
            return  # a newer request is queued behind this one
        # With a Run on host the list is that host's runs: this computer's would mix with them.
        if host is None:
            trials = trial_runs(sweeps_dir) if sweeps_dir is not None else {}
            # Newest first, the trials among the runs (run folders' names start with their start time).
            paths = sorted([*run_dirs(Path(runs_dir)), *trials], key=lambda p: p.name, reverse=True)
        else:
            trials, paths = {}, []
        self.counted.emit(generation, len(paths))
        self.jobs.emit(generation, scheduled_jobs(paths))
        rows: list[tuple[RunInfo, bool, RunProcess | None, str]] = []  # read_row()'s
        last = time.monotonic()
        for path in paths:
            if generation != self._latest.generation:
                return
            row = read_row(path)
            if path in trials:
                row = (dataclasses.replace(row[0], trial=trials[path]), *row[1:])
            rows.append(row)
            if len(rows) >= BATCH_RUNS or time.monotonic() - last >= BATCH_SECONDS:
                self.batch.emit(generation, rows)
                rows, last = [], time.monotonic()
        if rows:
            self.batch.emit(generation, rows)
        if host is not None and generation == self._latest.generation:
            try:
                self.batch.emit(generation, read_host_rows(host))
            except HostError as exc:
                self.host_failed.emit(generation, str(exc))
        self.done.emit(generation)


class RunReader(QObject):
    """The GUI-thread front: ``read(runs_dir)`` starts a fill and returns its generation;
    ``counted``, ``batch`` and ``done`` arrive on the GUI thread for the latest fill only."""

    counted = Signal(int)
    jobs = Signal(object)
    batch = Signal(object)
    done = Signal()
    host_failed = Signal(str)
    _requested = Signal(int, str, object, object)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._latest = _Latest()
        self._filling = False
        # A child: Qt deletes it after ``destroyed`` below has stopped it (a running QThread
        # must never be deleted, and Python may drop its wrappers in any order at exit).
        self._thread = QThread(self)
        self._thread.setObjectName("RunReader")
        self._worker = _ReadWorker(self._latest)
        self._worker.moveToThread(self._thread)
        self._thread.finished.connect(self._worker.deleteLater)  # deleted on its own thread
        queued = Qt.ConnectionType.QueuedConnection
        self._requested.connect(self._worker.read, queued)
        self._worker.counted.connect(self._on_counted, queued)
        self._worker.jobs.connect(self._on_jobs, queued)
        self._worker.batch.connect(self._on_batch, queued)
        self._worker.done.connect(self._on_done, queued)
        self._worker.host_failed.connect(self._on_host_failed, queued)
        self._thread.start()
        # Stop the thread before Qt or Python tears anything down. A plain function holding
        # only the thread: it may run while this object is being destroyed.
        self.destroyed.connect(lambda *_, latest=self._latest, thread=self._thread: _stop(latest, thread))
        app = QCoreApplication.instance()
        if app is not None:
            app.aboutToQuit.connect(self.stop)

    def read(self, runs_dir: str | Path, host: Host | None = None, sweeps_dir: str | Path | None = None) -> int:
        """Read ``runs_dir`` and the trials of the sweeps in ``sweeps_dir`` (by default the
        window's sweeps folder, where Tools -> New sweep starts them)."""
        if not self._thread.isRunning():
            return self._latest.generation  # stopped: the window is closing
        self._latest.generation += 1
        self._filling = True
        sweeps = Path(sweeps_dir) if sweeps_dir is not None else default_sweeps_dir()
        self._requested.emit(self._latest.generation, str(runs_dir), host, sweeps)
        return self._latest.generation

    def is_filling(self) -> bool:
        return self._filling

    def stop(self) -> None:
        """Drop any fill and end the thread (the window closes). Idempotent; blocks for at
        most one run's read."""
        self._filling = False
        _stop(self._latest, self._thread)

    @Slot(int, int)
    def _on_counted(self, generation: int, count: int) -> None:
        if generation == self._latest.generation:
            self.counted.emit(count)

    @Slot(int, object)
    def _on_jobs(self, generation: int, jobs: dict) -> None:
        if generation == self._latest.generation:
            self.jobs.emit(jobs)

    @Slot(int, object)
    def _on_batch(self, generation: int, rows: list) -> None:
        if generation == self._latest.generation:
            self.batch.emit(rows)

    @Slot(int, str)
    def _on_host_failed(self, generation: int, line: str) -> None:
        if generation == self._latest.generation:
            self.host_failed.emit(line)

    @Slot(int)
    def _on_done(self, generation: int) -> None:
        if generation == self._latest.generation and self._filling:
            self._filling = False
            self.done.emit()


def _stop(latest: _Latest, thread: QThread) -> None:
    latest.generation = -1  # the worker's loop drops its fill at the next run
    if thread.isRunning():
        thread.quit()
        thread.wait(10_000)
