"""RunJob: a run's engine process (``train``, ``resume``) on the one job lifecycle.

A run is a :class:`~gui_app.ui.workers.engine_job.ServingJob`: its stdin stays open for control
words (:meth:`~gui_app.ui.workers.engine_job.ServingJob.send`: ``pause``, ``continue``,
``checkpoint``), :meth:`~gui_app.ui.workers.engine_job.ServingJob.stop` writes ``stop`` and kills
it after the grace period (docs/architecture.md, "Process model": stop is cooperative), and
:meth:`RunJob.kill` ends it at once. What differs is how its lines and its end read:

    result(Event)    every event, as it comes, decoded here once (gui_app.core.events); a line that
                     is no event goes to ``log_line``, and so does a ``warning`` event's message
    history(dict)    ``attach --history``'s first line (gui_app/core/history/wire.py), not counted
                     in ``lines_read``: the lines after it go on from the line it names
    ended(str, str)  how the run ended, once, before ``finished``: the status and message of its
                     ``run_finished`` event; else ``interrupted`` when it was killed as asked (the
                     stop's grace period ran out, or :meth:`RunJob.kill`), or ``failed`` with the
                     ``error`` event's message, the one error line of its stderr, or what its exit says

The command is whatever the caller runs (gui_app.ui.workers.supervisor builds it), so a command
that follows a run started elsewhere reads the same way.
"""
from __future__ import annotations

from typing import Any, Callable, Self, Sequence

from PySide6.QtCore import QObject, Signal

from gui_app.core.engine_output import EXIT_OK
from gui_app.core.event_lines import LineDecoder
from gui_app.core.events import Error, RunFinished, RunStarted, Warning
from gui_app.core.history.wire import TYPE as HISTORY
from gui_app.ui.workers.engine_job import KILL_WAIT_MS, ServingJob


class RunJob(ServingJob):
    ended = Signal(str, str)
    history = Signal(dict)
    NOT_STARTED = -1  # exit_code of a command that could not be started at all

    def __init__(self, command: Sequence[str], parent: QObject | None = None) -> None:
        super().__init__(command, name="the engine", parent=parent)
        self._error: str | None = None  # the message of the run's error event, if it wrote one
        self._run_finished: RunFinished | None = None
        self.exit_code: int | None = None  # how the process exited (None: killed by a signal, or still running)
        self.lines_read = 0  # JSON lines read from stdout: an attachment's place in the events file
        self._decoder = LineDecoder()  # lean steps get their devices from the run_started (if it came)

    def on_end(self, slot: Callable[[str, str], Any]) -> Self:
        self.ended.connect(slot)
        return self

    def kill(self, reason: str) -> None:
        """End the process now and wait until it has (the window closes): ``ended`` says
        ``interrupted`` with ``reason``, before this returns."""
        if self.is_running():
            self.kill_reason = reason
            self._process.kill()
            self._process.wait(KILL_WAIT_MS)

    @property
    def run_finished(self) -> RunFinished | None:
        """The run's run_finished event, once it has come."""
        return self._run_finished

    def detach(self, wait_ms: int = KILL_WAIT_MS) -> None:
        """End the process by closing its stdin (``attach`` then detaches: the run goes on) and
        wait for it; killed when it has not ended within ``wait_ms``."""
        if self.is_running():
            self._process.close_stdin()
            if not self._process.wait(wait_ms):
                self._process.kill()
                self._process.wait(KILL_WAIT_MS)

    def _on_event(self, value: dict) -> None:
        if value.get("type") == HISTORY:
            if isinstance(value.get("started"), dict):  # the devices its lean step lines refer to
                self._decoder.value(value["started"])
            self.history.emit(value)
            return
        self.lines_read += 1
        event = self._decoder.value(value)  # once, where the line enters the window
        if event is None:  # stdout is reserved for events; show strays rather than lose them
            self.log_line.emit(f"[engine stdout] {value}")
            return
        if isinstance(event, Warning):
            self.log_line.emit(f"warning: {event.message}")
        elif isinstance(event, Error):
            self._error = event.message
        elif isinstance(event, RunFinished):
            self._run_finished = event
        elif isinstance(event, RunStarted):  # a resumed run, read from its first event: that end was not its last
            self._run_finished = None
        self._take_answer(event)

    def _report_end(self, code: int, crashed: bool, line: str) -> None:
        self.exit_code = None if crashed else code
        event = self._run_finished
        if event is not None:
            self._end(event.status, event.message or "")
        elif self.killed and self.kill_reason:
            self._end("interrupted", self.kill_reason)
        elif crashed:
            # Killed by a signal (out of memory, a segfault): the line is then only one that
            # states an error, never any TensorFlow message (gui_app.core.engine_output.error_line).
            self._end("failed", self._error or line or f"{self.name} process crashed or was killed (out of memory?)")
        elif code == EXIT_OK:
            self._end("failed", f"{self.name} exited without reporting the end of the run")
        else:  # the engine's contract: a failure ends with one line on stderr naming the reason
            self._end("failed", self._error or line or f"{self.name} exited with code {code}")

    def _on_start_failed(self, message: str) -> None:
        self.exit_code = self.NOT_STARTED
        super()._on_start_failed(f"cannot start {self.name}: {message}")

    def _fail(self, message: str) -> None:
        self._end("failed", message)

    def _end(self, status: str, message: str) -> None:
        self._reported = True
        self.ended.emit(status, message)
