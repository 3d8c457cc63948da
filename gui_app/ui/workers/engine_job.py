"""EngineJob: one engine command the window runs, from its start to ``finished``.

    self._job = (EngineJob(engine_command("devices", "--json"), name="device detection", timeout_s=300,
                           parent=self)
                 .on_result(self._on_detected).on_failure(self._on_failed)
                 .start(replacing=self._job))

Every engine process -- device detection, inspection, export, the scaling benchmark, dataset
preparation, the Try tab's model and the run itself (:class:`~gui_app.ui.workers.run_job.RunJob`)
-- runs its command through the one process runner (:class:`EngineProcess`) and reads it through
this one lifecycle (Orange's TaskState, Anki's QueryOp):

    progress(Progress)  a ``progress`` line (gui_app.core.events), only when it says something new
    result(object)      the command's answer: its line of type ``answer`` (without one, the JSON
                        object it prints), passed through ``read``; emitted once the process has
                        ended with an exit code in ``ok_codes``
    failed(str)         why there is no answer, one line: the engine's error line
                        (gui_app.core.engine_output.error_line, without the ``replica-studio
                        COMMAND:`` prefix) or what its exit says
    finished()          always, last, once: after the result, the failure or a cancel
    log_line(str)       the engine's stderr, for the Log tab

States: idle -> running -> (stopping or cancelling ->) done; a job runs once. :meth:`EngineJob.cancel` asks
the process to end (SIGTERM: the engine removes its temporaries) and kills it after a grace
period; a cancelled job emits neither ``result`` nor ``failed``, and ``finished`` still comes.
``timeout_s`` turns a hung engine (a stuck GPU driver, a network mount) into a failure.
``start(replacing=old)`` disconnects the older job's slots before anything else (napari's rule),
so its late answer is never shown, then ends and deletes it.

:class:`ServingJob` is the long-lived kind (``predict --serve``, the Try tab; a run): its stdin stays
open for lines (:meth:`ServingJob.send`, :meth:`ServingJob.ask`), every answer line is a ``result``
as it comes, and any end that was not asked for is a failure. :meth:`ServingJob.stop` asks it to
end with a word on stdin and kills it after a grace period (a run checkpoints in between).
"""
from __future__ import annotations

import dataclasses
import json
import warnings
from typing import Any, Callable, Self, Sequence

from PySide6.QtCore import QObject, QTimer, Signal, SignalInstance

from gui_app.core.engine_output import EXIT_INTERRUPTED, EXIT_OK, without_command_prefix
from gui_app.core.events import Progress, decode
from gui_app.ui.workers.process import DEFAULT_GRACE_S, EngineProcess

IDLE, RUNNING, STOPPING, CANCELLING, DONE = "idle", "running", "stopping", "cancelling", "done"
# A question the window waits on (devices, inspect): a hung engine (a stuck GPU driver, a network
# mount) must not leave "Detecting devices…" or "Inspecting…" on screen forever.
QUERY_TIMEOUT_S = 300.0
KILL_WAIT_MS = 2000  # a killed process is gone in milliseconds; this only bounds a blocked wait


class EngineJob(QObject):
    progress = Signal(object)
    result = Signal(object)
    failed = Signal(str)
    finished = Signal()
    log_line = Signal(str)

    keeps_stdin = False  # a one-answer command reads nothing: its stdin is closed at once

    def __init__(self, command: Sequence[str], *, name: str = "the engine", answer: str | None = None,
                 read: Callable[[dict], Any] | None = None, ok_codes: Sequence[int] = (EXIT_OK,),
                 timeout_s: float | None = None, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.command = list(command)
        self.name = name  # how failures name it: "the export exited with code 3"
        self.cancelled = False
        self.kill_reason: str | None = None  # why it is killed, when a kill was asked for (ServingJob.stop)
        self._answer_type, self._read, self._ok_codes = answer, read, tuple(ok_codes)
        self._state = IDLE
        self._answer: dict | None = None
        self._last_progress: Progress | None = None
        self._reported = False  # a result or a failure was emitted: only finished may follow
        self._process = EngineProcess(self)
        self._process.json_event.connect(self._on_event)
        self._process.log_line.connect(self.log_line)
        self._process.finished.connect(self._on_process_finished)
        self._process.start_failed.connect(self._on_start_failed)
        self._timer: QTimer | None = None
        if timeout_s is not None:
            self._timer = QTimer(self, singleShot=True, interval=int(timeout_s * 1000))
            self._timer.timeout.connect(self._on_timeout)

    # ---- connecting, so that a job reads like a sentence where it is made -------------------
    def on_progress(self, slot: Callable[[Progress], Any]) -> Self:
        self.progress.connect(slot)
        return self

    def on_result(self, slot: Callable[[Any], Any]) -> Self:
        self.result.connect(slot)
        return self

    def on_failure(self, slot: Callable[[str], Any]) -> Self:
        self.failed.connect(slot)
        return self

    def on_finished(self, slot: Callable[[], Any]) -> Self:
        self.finished.connect(slot)
        return self

    # A caller may pass its own signal to be forwarded to (Qt connects a signal to a signal).
    def on_log_line(self, slot: Callable[[str], Any] | SignalInstance) -> Self:
        self.log_line.connect(slot)
        return self

    # ---- the lifecycle ----------------------------------------------------------------------
    @property
    def state(self) -> str:
        return self._state

    def is_running(self) -> bool:
        """Started and not finished yet (stopping and cancelling count: its process may still be there)."""
        return self._state in (RUNNING, STOPPING, CANCELLING)

    @property
    def killed(self) -> bool:
        """The process had to be killed (it did not end within the grace period, or timed out)."""
        return self._process.killed

    def start(self, replacing: EngineJob | None = None) -> Self:
        """Run the command; ``replacing``: the older job this one supersedes (see :meth:`discard`)."""
        if replacing is not None and replacing is not self:
            replacing.discard()
        if self._state != IDLE:
            raise RuntimeError(f"{self.name}: an EngineJob runs once")
        self._state = RUNNING
        if self._timer is not None:
            self._timer.start()
        self._process.start(self.command, stdin=self.keeps_stdin)
        return self

    def cancel(self, grace_s: float = DEFAULT_GRACE_S, wait: bool = False) -> None:
        """End the process: SIGTERM, then a kill after ``grace_s``. ``wait``: block until it has
        ended (the window is closing: a process left running would be killed with the
        application, before it could remove its temporaries); ``finished`` is emitted from here."""
        if self._state in (RUNNING, STOPPING):
            self._state = CANCELLING
            self.cancelled = True
            self._stop_timer()
            self._process.terminate(grace_s)
        if wait and self.is_running() and not self._process.wait(int(grace_s * 1000)):
            self._process.kill()
            self._process.wait(KILL_WAIT_MS)

    def discard(self) -> None:
        """Forget this job: disconnect every slot connected to it (a late answer reaches
        nobody), end its process and delete it once it has finished."""
        for signal in (self.progress, self.result, self.failed, self.finished, self.log_line):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # PySide warns when nothing was connected
                signal.disconnect()
        if self.is_running():
            self.finished.connect(self.deleteLater)
            self.cancel()
        else:
            self.deleteLater()

    # ---- the process's lines and its end -------------------------------------------------------
    def _on_event(self, value: dict) -> None:
        if value.get("type") == Progress.TYPE:
            progress = decode(value)
            if isinstance(progress, Progress):
                self._take_progress(progress)
        elif self._answer_type is None or value.get("type") == self._answer_type:
            self._take_answer(value)

    def _take_progress(self, progress: Progress) -> None:
        seen = dataclasses.replace(progress, time=0.0)  # the time alone says nothing new
        if seen != self._last_progress and self._state == RUNNING:
            self._last_progress = seen
            self.progress.emit(progress)

    def _take_answer(self, value: Any) -> None:
        self._answer = value  # a one-answer command is judged by its exit: kept until then

    def _on_process_finished(self, code: int, crashed: bool, line: str) -> None:
        self._stop_timer()
        if not (self._reported or self.cancelled):
            self._report_end(code, crashed, without_command_prefix(line))
        self._finish()

    def _report_end(self, code: int, crashed: bool, line: str) -> None:
        if self._answer is not None and code in self._ok_codes and not crashed:
            try:
                value = self._read(self._answer) if self._read is not None else self._answer
            except (ValueError, KeyError, TypeError) as exc:
                self._fail(f"{self.name} printed a result the window cannot read ({exc})")
                return
            self._reported = True
            self.result.emit(value)
        elif line:
            self._fail(line)
        elif crashed:
            self._fail(f"{self.name} crashed")
        elif code == EXIT_INTERRUPTED:
            self._fail(f"{self.name} was interrupted")
        elif code in self._ok_codes:
            self._fail(f"{self.name} printed no result")
        else:
            self._fail(f"{self.name} exited with code {code}")

    def _on_start_failed(self, message: str) -> None:
        self._stop_timer()
        if not (self._reported or self.cancelled):
            self._fail(message)
        self._finish()

    def _on_timeout(self) -> None:
        # Only the timer calls this, so it exists here.
        if self._state == RUNNING and self._timer is not None:
            self._fail(f"{self.name} did not answer within {self._timer.interval() / 1000:g} s")
            self._state = CANCELLING
            self._process.kill()

    def _fail(self, message: str) -> None:
        self._reported = True
        self.failed.emit(message)

    def _finish(self) -> None:
        self._state = DONE
        self.finished.emit()

    def _stop_timer(self) -> None:
        if self._timer is not None:
            self._timer.stop()


class ServingJob(EngineJob):
    """A long-lived engine process that answers requests (``predict --serve``): each JSON line
    written with :meth:`ask` gets answer lines back, each emitted as a ``result`` at once. It
    ends when it is cancelled (or discarded); an end that was not asked for is ``failed``.

        self._server = (ServingJob(engine_command("predict", "--serve", model), name="the model process",
                                   parent=self)
                        .on_result(self._on_answer).on_failure(self._on_server_failed)
                        .start(replacing=self._server))
        self._server.ask({"id": 1, "images": ["seven.png"]})
    """

    keeps_stdin = True

    def send(self, line: str) -> bool:
        """Write one line on its stdin (a request, a control word); False when the process is not
        running, or was asked to stop."""
        return self._state == RUNNING and self._process.write_line(line)

    def ask(self, request: dict) -> bool:
        """Send one request as a JSON line; False when the process is not (or no longer) running."""
        return self.send(json.dumps(request))

    def stop(self, grace_s: float, word: str | None = None) -> bool:
        """Ask the process to end: ``word`` on its stdin, then the end of its input; kill it if it
        has not ended after ``grace_s`` (then ``killed`` is True and ``kill_reason`` says so). Its
        answers keep coming until it ends. False when it is not running (or already stopping)."""
        if self._state != RUNNING:
            return False
        if word is not None:
            self._process.write_line(word)
        self._process.close_stdin()
        self._state = STOPPING
        self.kill_reason = f"{self.name} did not stop within {grace_s:g} s and was killed"
        self._process.kill_after(grace_s)
        return True

    def _take_answer(self, value: Any) -> None:
        if self._state in (RUNNING, STOPPING):
            self.result.emit(value)

    def _report_end(self, code: int, crashed: bool, line: str) -> None:
        if self.killed and self.kill_reason:
            self._fail(self.kill_reason)
        elif self._state != STOPPING:  # an end that was not asked for
            self._fail(line or (f"{self.name} crashed" if crashed else f"{self.name} ended (exit code {code})"))
