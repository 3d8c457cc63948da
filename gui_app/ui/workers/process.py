"""Run a short engine command (``devices --json``, ``inspect ...``) without blocking the GUI.

A QProcess is asynchronous by construction: it is driven by the event loop's socket
notifiers, so it needs no thread of its own and its signals arrive on the GUI thread where
the result is shown. The command prints one JSON object on stdout; on failure the engine
exits non-zero with a one-line reason on stderr, which becomes :attr:`failed`'s message.

Usage, in the spirit of Anki's ``QueryOp``::

    job = JsonCommand(app_command("devices", "--json"), parent=self)
    job.succeeded.connect(self._on_devices)
    job.failed.connect(self._on_devices_failed)
    job.start()
"""
from __future__ import annotations

import json
import re

from PySide6.QtCore import QObject, QProcess, QProcessEnvironment, QTimer, Signal

from gui_app.identity import app_env


# A line that states an error itself (a Python exception, a fatal interpreter error), unlike
# TensorFlow's log lines, which may say "error" about things that do not matter (cuInit).
_ERROR_LINE = re.compile(r"^(?:[\w.]+(?:Error|Exception)\b|Fatal Python error\b)")


def is_error_line(line: str) -> bool:
    return bool(_ERROR_LINE.match(line.strip()))


def error_line(stderr: str, crashed: bool = False) -> str | None:
    """The line of an engine's stderr that explains a failure.

    The engine's contract: a failure ends with one line on stderr naming the reason, so that
    is the last line. A process killed by a signal wrote no such line and its last line may
    be any TensorFlow message, so then only a line that states an error is trusted."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    if not crashed:
        return lines[-1] if lines else None
    return next((ln for ln in reversed(lines) if is_error_line(ln)), None)


def process_environment(extra: dict[str, str] | None = None) -> QProcessEnvironment:
    """app_env() as a QProcessEnvironment."""
    values = app_env(extra)
    env = QProcessEnvironment()
    for key, value in values.items():
        env.insert(key, value)
    return env


class JsonCommand(QObject):
    """One run of a command whose stdout is a JSON object. Emits exactly one of
    ``succeeded(dict)`` / ``failed(str)`` unless cancelled; then ``done()``."""

    succeeded = Signal(dict)
    failed = Signal(str)
    done = Signal()

    def __init__(self, command: list[str], parent: QObject | None = None, timeout_s: float = 300.0) -> None:
        super().__init__(parent)
        self._command = list(command)
        self._cancelled = False
        self._process = QProcess(self)
        self._process.setProcessEnvironment(process_environment())
        self._process.finished.connect(self._on_finished)
        self._process.errorOccurred.connect(self._on_error)
        # A hung engine (a stuck GPU driver, a network mount) must not leave "Inspecting…"
        # forever: give up after timeout_s and report it.
        self._timer = QTimer(self, singleShot=True, interval=int(timeout_s * 1000))
        self._timer.timeout.connect(self._on_timeout)
        self._reported = False

    def start(self) -> None:
        self._process.start(self._command[0], self._command[1:])
        self._process.closeWriteChannel()
        self._timer.start()

    def is_running(self) -> bool:
        return self._process.state() != QProcess.ProcessState.NotRunning

    def cancel(self) -> None:
        """Forget the result and end the process (used when a newer request replaces it)."""
        self._cancelled = True
        self._timer.stop()
        if self.is_running():
            self._process.kill()
            self._process.waitForFinished(2000)

    def _report(self, ok: bool, payload) -> None:
        if self._reported or self._cancelled:
            return
        self._reported = True
        self._timer.stop()
        (self.succeeded if ok else self.failed).emit(payload)
        self.done.emit()

    def _on_timeout(self) -> None:
        self._process.kill()
        self._report(False, f"{self._describe()} did not answer within {self._timer.interval() // 1000} s")

    def _on_error(self, error: QProcess.ProcessError) -> None:
        if error == QProcess.ProcessError.FailedToStart:
            self._report(False, f"cannot start {self._command[0]}: {self._process.errorString()}")

    def _on_finished(self, code: int, status: QProcess.ExitStatus) -> None:
        stdout = bytes(self._process.readAllStandardOutput()).decode("utf-8", "replace")
        stderr = bytes(self._process.readAllStandardError()).decode("utf-8", "replace")
        if status == QProcess.ExitStatus.CrashExit:
            self._report(False, error_line(stderr, crashed=True) or f"{self._describe()} crashed")
            return
        if code != 0:
            self._report(False, error_line(stderr) or f"{self._describe()} exited with code {code}")
            return
        try:
            result = json.loads(stdout)
            if not isinstance(result, dict):
                raise ValueError("not a JSON object")
        except ValueError as exc:
            self._report(False, f"{self._describe()} printed no JSON result ({exc})")
            return
        self._report(True, result)

    def _describe(self) -> str:
        words = [w for w in self._command[1:] if not w.startswith("-") and w not in ("gui_app.engine",)]
        return f"engine {words[0]}" if words else "engine"
