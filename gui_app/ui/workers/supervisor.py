"""RunSupervisor: starts one engine process per run and turns its output into Qt signals.

The work happens on a QThread (docs/architecture.md, "Process model"): an ``_EngineWorker`` living there reads
the engine's stdout and stderr, parses the JSON lines, batches events, writes control words
and runs the kill timer. It drives the engine with an :class:`~gui_app.ui.workers.process.EngineProcess`
(the one process runner) created on that thread: its QProcess reports "stdout readable",
"stderr readable" and "exited" as events on the worker's own event loop, so one thread does
everything with no blocking reads, no extra reader threads and no locks.

:class:`RunSupervisor` is the front the GUI talks to. It lives on the thread that created it
and re-emits the worker's signals there through queued connections, so every receiver -
a widget slot, a lambda, ``qtbot.waitSignal`` - runs on the GUI thread. (A plain Python
callable connected straight to a signal emitted on another thread would run on that other
thread.) It never touches a widget.

Signals:
    events(list)                   the events (gui_app.core.events, decoded once here), in order,
                                   batched every ``batch_ms``
    run_started(RunStarted)        the run_started event, emitted before the batch holding it
    finished(status, run_dir, msg) completed | stopped | failed | interrupted (killed after
                                   the stop grace period or at exit); ``msg`` explains it
    log_line(str)                  one line of the engine's stderr (and its warnings)
    state_changed(str)             idle | starting | running | paused | stopping
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Callable, Sequence

from PySide6.QtCore import QCoreApplication, QObject, Qt, QThread, QTimer, Signal, Slot

from gui_app.core.config import RunConfig
from gui_app.core.events import Continued, Error, Event, Paused, RunFinished, RunStarted, Warning, decode
from gui_app.identity import app_command as default_engine_command
from gui_app.ui.workers.process import EngineProcess

EngineCommand = Callable[..., list[str]]  # same signature as gui_app.identity.app_command


class RunSupervisor(QObject):
    events = Signal(list)
    run_started = Signal(object)
    finished = Signal(str, str, str)
    log_line = Signal(str)
    state_changed = Signal(str)

    def __init__(self, engine_command: EngineCommand = default_engine_command, *,
                 grace_seconds: float = 30.0, batch_ms: int = 50, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._engine_command = engine_command
        self._state = "idle"
        self._thread = QThread()
        self._thread.setObjectName("RunSupervisor")
        self._worker = _EngineWorker(grace_seconds, batch_ms)
        self._worker.moveToThread(self._thread)
        self._thread.finished.connect(self._worker.deleteLater)
        queued = Qt.ConnectionType.QueuedConnection
        for name in ("events", "run_started", "finished", "log_line"):
            getattr(self._worker, name).connect(getattr(self, name), queued)
        self._worker.state_changed.connect(self._on_worker_state, queued)
        self._thread.start()
        app = QCoreApplication.instance()
        if app is not None:  # last line of defence: never leave an engine behind at exit
            app.aboutToQuit.connect(self.close)

    def state(self) -> str:
        return self._state

    def is_active(self) -> bool:
        return self._state != "idle"

    def start_train(self, config: RunConfig, runs_dir: str | Path) -> None:
        """Start ``train`` on ``config``; the engine creates the run directory in ``runs_dir``."""
        self._claim()
        fd, path = tempfile.mkstemp(prefix="replica-studio-", suffix=".json")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(config.to_json())
        command = self._engine_command("train", path, "--events", "jsonl", "--control", "stdin",
                                       "--runs-dir", str(runs_dir))
        self._worker.start_requested.emit(command, "", path)

    def start_resume(self, run_dir: str | Path, overrides: Sequence[str] = ()) -> None:
        """Continue a stopped, interrupted or failed run from its last checkpoint; ``overrides``
        are ``KEY=VALUE`` changes (``resume --set``) such as a smaller batch after running out of memory."""
        self._claim()
        sets = [word for override in overrides for word in ("--set", override)]
        command = self._engine_command("resume", str(run_dir), "--events", "jsonl", "--control", "stdin", *sets)
        self._worker.start_requested.emit(command, str(run_dir), "")

    def stop(self) -> None:
        """Cooperative stop (checkpoint, no evaluation); killed after ``grace_seconds``."""
        self._worker.control_requested.emit("stop")

    def pause(self) -> None:
        self._worker.control_requested.emit("pause")

    def resume(self) -> None:
        self._worker.control_requested.emit("continue")

    def checkpoint(self) -> None:
        self._worker.control_requested.emit("checkpoint")

    def close(self) -> None:
        """Kill any engine still running and end the thread. Idempotent; blocks briefly."""
        if self._thread.isRunning():
            self._worker.shutdown_requested.emit()  # blocking: returns once the engine is gone
            self._thread.quit()
            self._thread.wait(10_000)

    def _claim(self) -> None:
        if self._state != "idle":
            raise RuntimeError("a run is already active; one run at a time")
        if not self._thread.isRunning():
            raise RuntimeError("the supervisor is closed")
        self._on_worker_state("starting")

    @Slot(str)
    def _on_worker_state(self, state: str) -> None:
        if state != self._state:
            self._state = state
            self.state_changed.emit(state)


class _EngineWorker(QObject):
    """Lives on the supervisor's thread; owns the EngineProcess of the current run."""

    events = Signal(list)
    run_started = Signal(object)
    finished = Signal(str, str, str)
    log_line = Signal(str)
    state_changed = Signal(str)

    start_requested = Signal(list, str, str)  # command, run_dir (resume) or "", temp config to delete
    control_requested = Signal(str)
    shutdown_requested = Signal()

    def __init__(self, grace_seconds: float, batch_ms: int) -> None:
        super().__init__()
        self.grace_seconds = grace_seconds
        self._state = "idle"
        self._process: EngineProcess | None = None
        self._flush_timer = QTimer(self, interval=batch_ms)
        self._flush_timer.timeout.connect(self._flush)
        self._reset_run()
        # Requests are emitted on the GUI thread and run here, on the worker's thread.
        queued = Qt.ConnectionType.QueuedConnection
        self.start_requested.connect(self._on_start, queued)
        self.control_requested.connect(self._on_control, queued)
        self.shutdown_requested.connect(self._on_shutdown, Qt.ConnectionType.BlockingQueuedConnection)

    def _set_state(self, state: str) -> None:
        if state != self._state:
            self._state = state
            self.state_changed.emit(state)

    def _reset_run(self) -> None:
        self._run_dir = ""
        self._temp_config = ""
        self._pending: list[Event] = []
        self._finished_event: RunFinished | None = None
        self._error_event: str | None = None
        self._stop_sent = False
        self._kill_reason: str | None = None

    @Slot(list, str, str)
    def _on_start(self, command: list, run_dir: str, temp_config: str) -> None:
        self._reset_run()
        self._run_dir, self._temp_config = run_dir, temp_config
        self._set_state("starting")
        process = EngineProcess(self)
        process.event.connect(self._take_event)
        process.log_line.connect(self.log_line)
        process.finished.connect(self._on_process_finished)
        process.start_failed.connect(lambda message: self._end_run("failed", f"cannot start the engine: {message}"))
        self._process = process
        self._flush_timer.start()
        process.start(command)

    @Slot(str)
    def _on_control(self, word: str) -> None:
        process = self._process
        if process is None or not process.is_running() or self._stop_sent:
            return
        process.write_line(word)
        if word == "stop":
            self._stop_sent = True
            process.close_stdin()  # end of input also means stop to the engine
            self._set_state("stopping")
            self._kill_reason = f"the engine did not stop within {self.grace_seconds:g} s and was killed"
            process.kill_after(self.grace_seconds)

    @Slot()
    def _on_shutdown(self) -> None:
        process = self._process
        if process is not None and process.is_running():
            self._kill_reason = "the engine was killed because Replica Studio closed"
            process.kill()
            process.wait(5000)  # emits finished -> _on_process_finished, synchronously

    def _take_event(self, value: dict) -> None:
        event = decode(value)  # once, where the line enters the window
        if event is None:  # stdout is reserved for events; show strays rather than lose them
            self.log_line.emit(f"[engine stdout] {value}")
            return
        if isinstance(event, RunStarted):
            self._run_dir = event.run_dir or self._run_dir
            self._flush()  # keep order: earlier events, then run_started, then this batch
            if not self._stop_sent:
                self._set_state("running")
            self.run_started.emit(event)
        elif isinstance(event, Paused) and not self._stop_sent:
            self._set_state("paused")
        elif isinstance(event, Continued) and not self._stop_sent:  # protocol 1's "resumed" too
            self._set_state("running")
        elif isinstance(event, Warning):
            self.log_line.emit(f"warning: {event.message}")
        elif isinstance(event, Error):
            self._error_event = event.message
        elif isinstance(event, RunFinished):
            self._finished_event = event
        self._pending.append(event)

    def _flush(self) -> None:
        if self._pending:
            batch, self._pending = self._pending, []
            self.events.emit(batch)

    def _on_process_finished(self, code: int, crashed: bool, error_line: str) -> None:
        if self._process is None:
            return
        event = self._finished_event
        if event is not None:
            status, message = event.status, event.message or ""
            self._run_dir = event.run_dir or self._run_dir
        elif self._process.killed and self._kill_reason:
            status, message = "interrupted", self._kill_reason
        elif crashed:
            # Killed by a signal (out of memory, a segfault): error_line is then only a line
            # that states an error, never any TensorFlow message.
            status = "failed"
            message = self._error_event or error_line or "the engine process crashed or was killed (out of memory?)"
        elif code == 0:
            status, message = "failed", "the engine exited without reporting the end of the run"
        else:
            # The engine's contract: a failure ends with one line on stderr naming the reason.
            status = "failed"
            message = self._error_event or error_line or f"engine exited with code {code}"
        self._end_run(status, message)

    def _end_run(self, status: str, message: str) -> None:
        self._flush()
        self._flush_timer.stop()
        if self._process is not None:
            self._process.deleteLater()
            self._process = None
        if self._temp_config:
            Path(self._temp_config).unlink(missing_ok=True)
        run_dir = self._run_dir
        self._set_state("idle")
        self.finished.emit(status, run_dir, message)
