"""The one process runner: every engine process the window starts goes through :class:`EngineProcess`.

Every engine job -- training (the RunSupervisor's :class:`~gui_app.ui.workers.run_job.RunJob`),
device detection, inspection, export, prediction (the Try tab's ``predict --serve``), the scaling
benchmark, dataset preparation, each an :class:`~gui_app.ui.workers.engine_job.EngineJob` -- runs
``gui_app.identity.app_command(...)`` here, so TensorFlow never enters the window's process.
So does every process that reaches an SSH host: the short commands as an EngineJob with ``--host``
(the engine does the ssh), the followers of a run there (the attachment's ``attach``, the Log
tab's ``log --follow``: :class:`~gui_app.ui.workers.remote_log.RemoteLog`, Open's replay) and the
run list's ``runs --json`` there (gui_app.ui.window.remote_runs.HostRunsJob) as the system ``ssh``
run here, its command line built off the GUI thread (gui_app/ui/workers/host_commands.py).
Nothing in the window waits for a process on its GUI thread.

A QProcess is asynchronous by construction: the event loop of the thread it lives on reports
"stdout readable", "stderr readable" and "exited", so it needs no thread of its own and no
blocking reads. One line reader turns the pipes into signals:

    event(dict)                  a stdout line that is a JSON object (the engine's events)
    log_line(str)                a stderr line (TensorFlow's log, the engine's reason) or a stray
                                 stdout line, marked ``[engine stdout]``: for the Log tab
    text_line(str)               a stdout line that is no JSON object, as it is (``train --detach``
                                 answers with the run directory: with ``text_answers`` set, such
                                 a line is not also a ``log_line``)
    finished(code, crashed, msg) the process ended; ``msg`` is the line of stderr that explains
                                 a failure (gui_app.core.engine_output.error_line) or ""
    start_failed(str)            the program could not be started at all

Ending: :meth:`terminate` asks (SIGTERM: the engine unwinds and removes its temporaries) and
kills after a grace period; :meth:`kill_after` only arms the kill (after a cooperative
``stop`` on stdin).
"""
from __future__ import annotations

from collections import deque

from PySide6.QtCore import QObject, QProcess, QProcessEnvironment, QTimer, Signal

from gui_app.core.engine_output import complete_lines, error_line, parse_json_line
from gui_app.identity import app_env

STDERR_TAIL = 200  # lines kept to explain a failure
DEFAULT_GRACE_S = 5.0
STRAY_PREFIX = "[engine stdout] "  # a stdout line that is no event, shown on the Log tab


def process_environment(extra: dict[str, str] | None = None) -> QProcessEnvironment:
    """app_env() as a QProcessEnvironment."""
    env = QProcessEnvironment()
    for key, value in app_env(extra).items():
        env.insert(key, value)
    return env


class EngineProcess(QObject):
    json_event = Signal(dict)  # not "event": that would hide QObject.event()
    log_line = Signal(str)
    text_line = Signal(str)
    finished = Signal(int, bool, str)
    start_failed = Signal(str)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._process: QProcess | None = None
        self._stdout_tail = self._stderr_tail = b""
        self._stderr_lines: deque[str] = deque(maxlen=STDERR_TAIL)
        self._kill_timer = QTimer(self, singleShot=True)
        self._kill_timer.timeout.connect(self.kill)
        # Its plain stdout lines are answers, not strays (``train --detach`` prints the run directory):
        # they go to ``text_line`` only, never to the Log tab as a line of the run's log.
        self.text_answers = False
        self.terminated = False  # terminate() or kill() was called: the end was asked for
        self.killed = False  # the grace period ran out (or kill() was called)

    # ---- control ---------------------------------------------------------------------------
    def start(self, command: list[str], env: dict[str, str] | None = None, stdin: bool = True) -> None:
        """Run ``command``; without ``stdin`` its input is closed at once."""
        if self.is_running():
            raise RuntimeError("this EngineProcess is already running a command")
        self._stdout_tail = self._stderr_tail = b""
        self._stderr_lines.clear()
        self.terminated = self.killed = False
        process = QProcess(self)
        process.setProcessEnvironment(process_environment(env))
        process.readyReadStandardOutput.connect(self._on_stdout)
        process.readyReadStandardError.connect(self._on_stderr)
        process.finished.connect(self._on_finished)
        process.errorOccurred.connect(self._on_error)
        self._process = process
        process.start(command[0], command[1:])
        if not stdin:
            process.closeWriteChannel()

    def is_running(self) -> bool:
        return self._running() is not None

    def _running(self) -> QProcess | None:
        """The process while it runs, else None."""
        process = self._process
        return process if process is not None and process.state() != QProcess.ProcessState.NotRunning else None

    def write_line(self, text: str) -> bool:
        """Send one line on the process's stdin; False when it is not running."""
        process = self._running()
        if process is None:
            return False
        process.write((text.rstrip("\n") + "\n").encode("utf-8"))
        return True

    def close_stdin(self) -> None:
        process = self._running()
        if process is not None:
            process.closeWriteChannel()

    def terminate(self, grace_s: float = DEFAULT_GRACE_S) -> None:
        """Ask the process to end (SIGTERM) and kill it if it has not after ``grace_s``."""
        process = self._running()
        if process is not None:
            self.terminated = True
            process.terminate()
            self.kill_after(grace_s)

    def kill_after(self, grace_s: float) -> None:
        """Kill the process unless it has ended within ``grace_s`` seconds."""
        if self.is_running():
            self._kill_timer.start(max(0, int(grace_s * 1000)))

    def kill(self) -> None:
        process = self._running()
        if process is not None:
            self.terminated = self.killed = True
            process.kill()

    def wait(self, timeout_ms: int = 5000) -> bool:
        """Block until the process has ended (its ``finished`` is emitted from here)."""
        process = self._running()
        return True if process is None else process.waitForFinished(timeout_ms)

    # ---- the line reader ---------------------------------------------------------------------
    def _on_stdout(self) -> None:
        if self._process is not None:
            self._take_stdout(bytes(self._process.readAllStandardOutput().data()))

    def _on_stderr(self) -> None:
        if self._process is not None:
            self._take_stderr(bytes(self._process.readAllStandardError().data()))

    def _take_stdout(self, data: bytes, final: bool = False) -> None:
        lines, self._stdout_tail = complete_lines(self._stdout_tail + data, final)
        for raw in lines:
            text = raw.decode("utf-8", "replace").strip()
            if not text:
                continue
            value = parse_json_line(text)
            if value is not None:
                self.json_event.emit(value)
            else:
                self.text_line.emit(text)
                if not self.text_answers:  # stdout is reserved for JSON lines; show strays rather than lose them
                    self.log_line.emit(f"{STRAY_PREFIX}{text}")

    def _take_stderr(self, data: bytes, final: bool = False) -> None:
        lines, self._stderr_tail = complete_lines(self._stderr_tail + data, final)
        for raw in lines:
            text = raw.decode("utf-8", "replace").rstrip()
            if text.strip():
                self._stderr_lines.append(text.strip())
                self.log_line.emit(text)

    def _on_error(self, error: QProcess.ProcessError) -> None:
        if error == QProcess.ProcessError.FailedToStart and self._process is not None:
            message = f"cannot start {self._process.program()}: {self._process.errorString()}"
            self._process.deleteLater()
            self._process = None
            self.start_failed.emit(message)

    def _on_finished(self, code: int, status: QProcess.ExitStatus) -> None:
        process = self._process
        if process is None:
            return
        self._kill_timer.stop()
        self._take_stdout(bytes(process.readAllStandardOutput().data()), final=True)
        self._take_stderr(bytes(process.readAllStandardError().data()), final=True)
        self._process = None
        process.deleteLater()
        crashed = status == QProcess.ExitStatus.CrashExit
        self.finished.emit(code, crashed, error_line(self._stderr_lines, crashed) or "")

