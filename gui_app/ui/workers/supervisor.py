"""RunSupervisor: follows one run at a time and turns its events into Qt signals.

The run's engine processes (the detached start, then ``attach``) run as jobs of an
:class:`~gui_app.ui.workers.attachment.Attachment`, on the one job lifecycle every engine
process shares (start, stop with a grace period, the one error line, the final message). They
live on the GUI thread, as every QObject of the window does (docs/architecture.md, "Qt facts"):
a QProcess needs no thread of its own (the event loop reports "stdout readable" and "exited"),
and decoding a line costs ~13 us, so a batch of a few hundred lines is a few ms. A worker thread
here once deadlocked the window: Qt destroyed one of the attachment's objects there while holding
a signal-slot mutex, PySide asked for the GIL inside that destructor, and the GUI thread held the
GIL waiting for the same mutex (a pooled one) in a connect.

:class:`RunSupervisor` is the front the GUI talks to, and the one place that knows the run's
state. It takes the worker's signals through queued connections, so a receiver -- a widget slot, a
lambda, ``qtbot.waitSignal`` -- runs from the event loop, never inside the worker's own call
(a slot that starts the next run from ``finished`` finds the worker done with the last). It
never touches a widget.

Signals:
    events(list)                   the events (gui_app.core.events, decoded once by the job), in
                                   order: the first after a quiet spell at once, then batched
                                   every ``batch_ms``
    run_started(RunStarted)        the run_started event, emitted before the batch holding it
    history(str, RunHistory)       an attached long run's history from its pyramid (``attach(...,
                                   history=True)``), named as the run list names the run, before
                                   its run_started and its events
    finished(status, run_dir, msg) completed | stopped | failed | interrupted (killed after the stop
                                   grace period) | detached (the window let go: the run goes on);
                                   ``msg`` explains it
    log_line(str)                  one line of the engine's stderr (and its warnings)
    state_changed(str)             idle | starting | running | paused | stopping

Every run is detached (docs/detached.md): the worker's :class:`~gui_app.ui.workers.attachment.Attachment`
starts it with a command that prints its run directory (:meth:`RunSupervisor.start`: ``train
--detach`` and ``resume --detach`` are two, built by ``engine_command``), then follows it with
``attach``, and attaches again from the last line it has when that ends while the run goes on
(``notice``). :meth:`RunSupervisor.attach` follows a run that is running already (started by an
earlier window, or a terminal), :meth:`RunSupervisor.follow` a run submitted to Slurm from its
first event. :meth:`RunSupervisor.close` lets go of the run: it goes on.

    notice(str)                    "following the run again…" while it re-attaches, "" once it has
"""
from __future__ import annotations

import dataclasses
import os
import tempfile
from pathlib import Path
from typing import Callable, Sequence

from PySide6.QtCore import QCoreApplication, QObject, Qt, QTimer, Signal, Slot

from gui_app.core.config import RunConfig
from gui_app.core.events import Continued, Event, Paused, RunFinished, RunStarted
from gui_app.core.history import RunHistory
from gui_app.core.ssh_hosts import Host, run_key
from gui_app.identity import app_command as default_engine_command
from gui_app.ui.workers.attachment import Attachment

EngineCommand = Callable[..., list[str]]  # same signature as gui_app.identity.app_command
IDLE, STARTING, RUNNING, PAUSED, STOPPING = "idle", "starting", "running", "paused", "stopping"


class RunSupervisor(QObject):
    events = Signal(list)
    run_started = Signal(object)
    history = Signal(str, object)
    finished = Signal(str, str, str)
    log_line = Signal(str)
    state_changed = Signal(str)
    notice = Signal(str)

    def __init__(self, engine_command: EngineCommand = default_engine_command, *,
                 grace_seconds: float = 30.0, batch_ms: int = 50, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._engine_command = engine_command
        self._state = IDLE
        self._closed = False
        self._worker = _RunWorker(engine_command, grace_seconds, batch_ms, parent=self)
        queued = Qt.ConnectionType.QueuedConnection
        self._worker.events.connect(self._on_events, queued)
        self._worker.run_started.connect(self._on_run_started, queued)
        self._worker.history.connect(self.history, queued)
        self._worker.finished.connect(self._on_finished, queued)
        self._worker.log_line.connect(self.log_line, queued)
        self._worker.notice.connect(self.notice, queued)
        app = QCoreApplication.instance()
        if app is not None:  # at exit the attachment ends; the run goes on
            app.aboutToQuit.connect(self.close)

    def state(self) -> str:
        return self._state

    def is_active(self) -> bool:
        return self._state != IDLE

    def start_train(self, config: RunConfig, runs_dir: str | Path, host: Host | None = None) -> None:
        """Start ``train`` on ``config``; the engine creates the run directory in ``runs_dir``,
        or on ``host`` (``train --host``: the configuration goes over the connection) in the
        runs folder of its entry (docs/hosts.md)."""
        self._check_idle()
        fd, path = tempfile.mkstemp(prefix="replica-studio-", suffix=".json")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(config.to_json())
        where = ["--runs-dir", str(runs_dir)] if host is None else ["--host", host.name]
        self.start(self._engine_command("train", path, "--detach", *where), temp_file=path, host=host)

    def start_resume(self, run_dir: str | Path, overrides: Sequence[str] = (), host: Host | None = None) -> None:
        """Resume a stopped, interrupted or failed run from its last checkpoint; ``overrides`` are
        ``KEY=VALUE`` changes (``resume --set``) such as a smaller batch after running out of memory.
        A run on ``host`` (``run_dir`` is its path there) resumes there."""
        sets = [word for override in overrides for word in ("--set", override)]
        where = [] if host is None else ["--host", host.name]
        # Here the window shows the run's history before and follows the resumed run from its
        # run_started (-1); a host's run has its history there: it comes as a first attach to it
        # does (``attach --history``), so the bytes over ssh do not grow with the run's length.
        self.start(self._engine_command("resume", str(run_dir), "--detach", *sets, *where), run_dir=str(run_dir),
                   from_line=-1 if host is None else 0, host=host, history=host is not None)

    def start_resume_bundle(self, bundle: str | Path, runs_dir: str | Path, overrides: Sequence[str] = ()) -> None:
        """Resume the run of a run bundle: the engine checks it and extracts it into a new run
        directory of ``runs_dir`` (``resume BUNDLE --runs-dir``), resumes it there and prints where;
        followed from its first event, as a new run is (its history comes with it)."""
        sets = [word for override in overrides for word in ("--set", override)]
        self.start(self._engine_command("resume", str(bundle), "--runs-dir", str(runs_dir), "--detach", *sets))

    def start(self, command: Sequence[str], *, run_dir: str = "", temp_file: str = "", from_line: int = 0,
              host: Host | None = None, history: bool = False) -> None:
        """Start a run with ``command``, an engine command that starts it detached and prints its
        run directory, then follow it (``attach``) from line ``from_line`` of its events (-1: from
        the start's own run_started). ``run_dir``: the run's folder when it is known before;
        ``temp_file``: deleted when the run ends; ``host``: the SSH host it runs on; ``history``
        (from line 0): a long run's history comes from its pyramid (the ``history`` signal). One
        run at a time."""
        self._check_idle()
        self._set_state(STARTING)
        self._worker.start(list(command), run_dir, temp_file, from_line, host, history)

    def attach(self, run_dir: str | Path, started: RunStarted | None, from_line: int, paused: bool = False,
               host: Host | None = None, history: bool = False, inode: int = 0) -> None:
        """Follow a run that is running already (on ``host``, when given): the window has the
        first ``from_line`` lines of its events (the history on screen), ``started`` is its
        run_started, said again (None: it comes with the events, from line 0). ``history``
        (from line 0): a long run's history comes from its pyramid (the ``history`` signal). ``inode``:
        of the events file the ``from_line`` lines were read from (0: not known), so a re-attachment
        after a resume replaced it reads the history again (Attachment)."""
        self._check_idle()
        self._set_state(STARTING)
        if started is not None:
            self._on_run_started(started)
        if paused:
            self._set_state(PAUSED)
        self._worker.start([], str(run_dir), "", from_line, host, history, inode)

    def follow(self, run_dir: str | Path) -> None:
        """Follow a run from its first event once it starts: a run submitted to Slurm, whose job
        may wait in the queue (``attach`` waits while the job is pending)."""
        self.attach(run_dir, None, 0)

    def stop(self) -> None:
        """Cooperative stop (checkpoint, no evaluation); killed after ``grace_seconds``."""
        if self._state in (STARTING, RUNNING, PAUSED):
            self._set_state(STOPPING)
            self._worker.stop()

    def pause(self) -> None:
        self._worker.control("pause")

    def continue_run(self) -> None:
        """Go on after a pause (``resume`` is for continuing a run from its checkpoint)."""
        self._worker.control("continue")

    def checkpoint(self) -> None:
        self._worker.control("checkpoint")

    def close(self) -> None:
        """Let go of the run (it goes on: ``finished`` says ``detached``); no run starts after.
        Idempotent; blocks briefly (the attach process is waited for)."""
        if not self._closed:
            self._closed = True
            self._worker.detach()  # returns once the attachment has ended

    # ---- the run's state, from what the worker relays ------------------------------------------
    def _check_idle(self) -> None:
        if self._state != IDLE:
            raise RuntimeError("a run is already active; one run at a time")
        if self._closed:
            raise RuntimeError("the supervisor is closed")

    def _set_state(self, state: str) -> None:
        if state != self._state:
            self._state = state
            self.state_changed.emit(state)

    @Slot(object)
    def _on_run_started(self, event: RunStarted) -> None:
        if self._state == STARTING:
            self._set_state(RUNNING)
        self.run_started.emit(event)

    @Slot(list)
    def _on_events(self, batch: list[Event]) -> None:
        if self._state in (RUNNING, PAUSED):  # a stop asked for outranks what the engine says
            for event in batch:
                if isinstance(event, Paused):
                    self._set_state(PAUSED)
                elif isinstance(event, Continued):  # protocol 1's "resumed" too
                    self._set_state(RUNNING)
        self.events.emit(batch)

    @Slot(str, str, str)
    def _on_finished(self, status: str, run_dir: str, message: str) -> None:
        self._set_state(IDLE)
        self.finished.emit(status, run_dir, message)


class _RunWorker(QObject):
    """Owns the Attachment of the current run and batches its events."""

    events = Signal(list)
    run_started = Signal(object)
    history = Signal(str, object)
    finished = Signal(str, str, str)
    log_line = Signal(str)
    notice = Signal(str)

    def __init__(self, engine_command: EngineCommand, grace_seconds: float, batch_ms: int,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._engine_command = engine_command
        self.grace_seconds = grace_seconds
        self._job: Attachment | None = None
        self._host: Host | None = None  # the SSH host of the run followed, if any
        self._run_dir = self._temp_file = ""
        self._pending: list[Event] = []
        # Batches: the first event after a quiet spell goes out as soon as the lines read with it
        # are in, then the events of the next ``batch_ms`` go together (the timer is that cooldown).
        # A fixed 50 ms tick made every event wait 25 ms on average; attach adds ~6-15 ms more.
        self._flush_timer = QTimer(self, interval=batch_ms)
        self._flush_timer.timeout.connect(self._on_batch_due)
        self._flush_soon = False

    def start(self, command: list, run_dir: str, temp_file: str, from_line: int, host: Host | None,
              history: bool = False, inode: int = 0) -> None:
        """Start (``command``) or attach to (``[]``) a run; see RunSupervisor.start and attach."""
        self._run_dir, self._temp_file, self._pending = run_dir and self._named(run_dir, host), temp_file, []
        self._host = host
        self._job = Attachment(self._engine_command, start_command=command, run_dir=run_dir, from_line=from_line,
                               host=host, history=history, inode=inode, parent=self)
        self._job.history.connect(self._take_history)
        self._job.notice.connect(self.notice)
        self._job.log_line.connect(self.log_line)
        self._job.on_result(self._take_event).on_end(self._on_ended).start()

    def control(self, word: str) -> None:
        if self._job is not None:
            self._job.send(word)

    def stop(self) -> None:
        if self._job is not None:
            self._job.stop(self.grace_seconds)

    def detach(self) -> None:
        if self._job is not None:
            self._job.detach()  # the run goes on; ends the attachment (_on_ended) before it returns

    @staticmethod
    def _named(run_dir: str, host: Host | None) -> str:
        """The window's name of the run: its path, or ``HOST:PATH`` for a run on a host."""
        return run_key(host.name if host is not None else None, run_dir)

    def _take_event(self, event: Event) -> None:
        if isinstance(event, (RunStarted, RunFinished)):
            if self._host is not None and event.run_dir:  # named as the run list names it
                event = dataclasses.replace(event, run_dir=self._named(event.run_dir, self._host))
            self._run_dir = event.run_dir or self._run_dir
        if isinstance(event, RunStarted):
            self._flush()  # keep order: earlier events, then run_started, then this batch
            self.run_started.emit(event)
        self._batch(event)

    def _take_history(self, history: RunHistory) -> None:
        """A long run's history (attach --history): shown first, then its run_started, then its events."""
        self._flush()
        started = history.started
        if started is not None and self._host is not None and started.run_dir:  # named as _take_event names it
            started = dataclasses.replace(started, run_dir=self._named(started.run_dir, self._host))
        self.history.emit(self._run_dir, history)  # the folder attached to (a host's: HOST:PATH)
        if started is not None:
            self.run_started.emit(started)

    def _batch(self, event: Event) -> None:
        self._pending.append(event)
        if not (self._flush_timer.isActive() or self._flush_soon):
            self._flush_soon = True
            QTimer.singleShot(0, self, self._flush_now)  # after the rest of this read

    def _flush_now(self) -> None:
        self._flush_soon = False
        self._flush()
        self._flush_timer.start()

    def _on_batch_due(self) -> None:
        if self._pending:
            self._flush()
        else:  # quiet: the next event goes at once
            self._flush_timer.stop()

    def _flush(self) -> None:
        if self._pending:
            batch, self._pending = self._pending, []
            self.events.emit(batch)

    def _on_ended(self, status: str, message: str) -> None:
        self._flush()
        self._flush_timer.stop()
        job, self._job = self._job, None
        if job is not None:
            run_dir = job.run_dir and self._named(job.run_dir, self._host)
            job.deleteLater()  # after this slot: its jobs' last signals are queued before
            self._run_dir = self._run_dir or run_dir
        if self._temp_file:
            Path(self._temp_file).unlink(missing_ok=True)
        self.finished.emit(status, self._run_dir, message)
