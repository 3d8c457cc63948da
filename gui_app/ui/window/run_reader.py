"""RunReader: reads the runs folder for the run list off the GUI thread, in batches.

Listing is cheap when every run has its ``summary.json`` (1,000 runs in about 0.12 s) but a
folder of runs without one -- written by an older version, or copied in -- means reading every
``events.jsonl`` in full (1,000 runs of 1.7 MB: about 15 s). Done on the GUI thread that froze
the window before its first paint; here the window paints at once and rows arrive as they are
read.

Threading (gui_app/ui/workers/background.py says why): a fill runs on a Python thread that
touches no Qt at all; it reads with the Qt-free ``gui_app.core.rundir`` and sends plain Python
values (``RunInfo``) that the GUI thread collects. Each fill has a generation number: a newer
request (a refresh while a fill runs) makes the older fill stop between two runs, and the GUI
side ignores values of any generation but the latest, so two fills never interleave in the list.
Runs submitted to Slurm or Kubernetes get their job's state before the fill's rows (``jobs``):
one squeue call per fill for all of them, one ``kubectl get job`` per context and namespace.

The sweeps' trials are listed too (their run directories are in the sweeps' folders,
gui_app.core.sweep_runs), each named "sweep NAME trial K".

With a host (the window's Run on host), its runs are read instead of the local ones: ``runs
--json`` there over ssh (gui_app.ui.window.remote_runs.HostRunsJob), a process the GUI thread never
waits for -- its command line is built once ``ssh -G`` has answered on the fill's thread, and
what it printed becomes rows on a thread too. A newer request ends the older listing's ssh (no
listings pile up behind a slow host) and closing the window does not wait for one. A host that
does not answer is one line (``host_failed``), not an error dialog.
"""
from __future__ import annotations

import dataclasses
import socket
import time
from pathlib import Path

from PySide6.QtCore import QCoreApplication, QObject, Signal

from gui_app.core.backends import kubernetes, scheduled_jobs
from gui_app.core.backends.ssh import SshBackend
from gui_app.core.live_runs import RunProcess, live_process, read_process
from gui_app.core.rundir import RunInfo, default_sweeps_dir, read_run, run_dirs
from gui_app.core.ssh import HostError
from gui_app.core.ssh_hosts import Host
from gui_app.core.sweep_runs import trial_runs
from gui_app.identity import app_command
from gui_app.ui.window.remote_runs import HostRunsJob, host_rows, list_arguments
from gui_app.ui.workers.background import Background, Send

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
    return info, info.resumable or kubernetes.resumable(path, info.status), live, host


def _fill(send: Send, latest: _Latest, generation: int, runs_dir: str, host: Host | None,
          sweeps_dir: Path | None) -> None:
    """One fill, on its thread: sends ``(kind, generation, value)``: ``counted`` (run folders
    found), ``jobs`` (backends.scheduled_jobs, before the first batch), ``batch`` ([read_row(path),
    ...]), then ``done`` (not for a dropped fill). With a host: ``host_ready`` (its
    :class:`SshBackend`, prepared) once ssh -G has answered; its listing follows on the GUI thread."""
    if generation != latest.generation:
        return  # a newer request came before this one started
    # With a Run on host the list is that host's runs: this computer's would mix with them.
    if host is not None:
        send(("counted", generation, 0))
        send(("jobs", generation, {}))
        backend = SshBackend(host.runs_dir or "~", host)
        backend.prepare()  # ssh -G: a process, waited for here
        send(("host_ready", generation, backend))
        return
    trials = trial_runs(sweeps_dir) if sweeps_dir is not None else {}
    # Newest first, the trials among the runs (run folders' names start with their start time).
    paths = sorted([*run_dirs(Path(runs_dir)), *trials], key=lambda p: p.name, reverse=True)
    send(("counted", generation, len(paths)))
    send(("jobs", generation, scheduled_jobs(paths)))
    rows: list[tuple[RunInfo, bool, RunProcess | None, str]] = []  # read_row()'s
    last = time.monotonic()
    for path in paths:
        if generation != latest.generation:
            return
        row = read_row(path)
        if path in trials:
            row = (dataclasses.replace(row[0], trial=trials[path]), *row[1:])
        rows.append(row)
        if len(rows) >= BATCH_RUNS or time.monotonic() - last >= BATCH_SECONDS:
            send(("batch", generation, rows))
            rows, last = [], time.monotonic()
    if rows:
        send(("batch", generation, rows))
    send(("done", generation, None))


def _read_listing(send: Send, generation: int, host_name: str, printed: str) -> None:
    """What ``runs --json`` printed there, as rows (it may list thousands of runs with their
    configs: read here, not on the GUI thread), or the line saying why it cannot be read."""
    try:
        send(("batch", generation, host_rows(host_name, printed)))
    except HostError as exc:
        send(("host_failed", generation, str(exc)))
    send(("done", generation, None))


class RunReader(QObject):
    """The GUI-thread front: ``read(runs_dir)`` starts a fill and returns its generation;
    ``counted``, ``batch`` and ``done`` arrive on the GUI thread for the latest fill only."""

    counted = Signal(int)
    jobs = Signal(object)
    batch = Signal(object)
    done = Signal()
    host_failed = Signal(str)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._latest = _Latest()
        self._filling = False
        self._background = Background(self)
        self._listing: HostRunsJob | None = None  # the host's runs --json under way
        self._listing_generation = 0  # the fill it lists for
        # A fill under way ends at its next run once the window is gone.
        self.destroyed.connect(lambda *_, latest=self._latest: setattr(latest, "generation", -1))
        app = QCoreApplication.instance()
        if app is not None:
            app.aboutToQuit.connect(self.stop)

    def read(self, runs_dir: str | Path, host: Host | None = None, sweeps_dir: str | Path | None = None) -> int:
        """Read ``runs_dir`` and the trials of the sweeps in ``sweeps_dir`` (by default the
        window's sweeps folder, where Tools -> New sweep starts them)."""
        if self._latest.generation < 0:
            return self._latest.generation  # stopped: the window is closing
        self._latest.generation += 1
        self._filling = True
        self._end_listing()  # an older listing's ssh ends now, not when its answer would be dropped
        sweeps = Path(sweeps_dir) if sweeps_dir is not None else default_sweeps_dir()
        self._background.run(_fill, self._latest, self._latest.generation, str(runs_dir), host, sweeps,
                             deliver=self._take, name="RunReader")
        return self._latest.generation

    def is_filling(self) -> bool:
        return self._filling

    def stop(self) -> None:
        """Drop any fill (the window closes). Idempotent; blocks for at most one run's read."""
        self._filling = False
        self._latest.generation = -1  # a fill under way stops at its next run
        self._end_listing()
        self._background.wait()

    def _end_listing(self) -> None:
        if self._listing is not None:
            self._listing.discard()  # its ssh ends; nothing it printed reaches the list
            self._listing = None

    def _take(self, value: tuple[str, int, object]) -> None:
        kind, generation, payload = value
        if generation != self._latest.generation:
            return  # an older fill's
        if kind == "host_ready":
            assert isinstance(payload, SshBackend)  # (what _fill sends with it)
            self._list_host(generation, payload)
            return
        if kind == "done":
            if self._filling:
                self._filling = False
                self.done.emit()
            return
        getattr(self, kind).emit(payload)  # counted, jobs, batch, host_failed

    def _list_host(self, generation: int, backend: SshBackend) -> None:
        """Start ``runs --json`` on the host (the latest request's: older ones were ended)."""
        self._end_listing()
        host = backend.host
        try:
            command = backend.command(app_command, list_arguments(host))
        except HostError as exc:  # no folder for ssh's shared connections
            self._on_listing_failed(str(exc), generation)
            return
        self._listing, self._listing_generation = HostRunsJob(command, host, parent=self), generation
        # Its signals go to the reader's own slots (docs/architecture.md, "Qt facts"); a listing
        # that was replaced is discarded with its connections, so these hear the latest one only.
        (self._listing.on_result(self._on_listed).on_failure(self._on_listing_failed)
         .on_finished(self._on_listing_finished).start())

    def _on_listed(self, printed: str) -> None:
        if self._listing is not None:
            self._background.run(_read_listing, self._listing_generation, self._listing.host.name, printed,
                                 deliver=self._take, name="RunReader-host")

    def _on_listing_failed(self, line: str, generation: int | None = None) -> None:
        generation = self._listing_generation if generation is None else generation
        self._take(("host_failed", generation, line))
        self._take(("done", generation, None))

    def _on_listing_finished(self) -> None:
        job, self._listing = self._listing, None
        if job is not None:
            job.deleteLater()  # after its last signal
