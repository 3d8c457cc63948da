"""The one way the engine starts, follows and stops a run process of its own.

- **start**: ``replica-studio train|resume ... --detach`` (engine/run/detach.py), here or with
  ``--host H`` on an SSH host: its answer is the run directory (the one line it prints once the
  run has started), or its exit code and error line when the run ended before it started.
  :func:`start` does not wait: :meth:`Starting.poll` says when the answer is there, so a caller
  that follows other runs meanwhile (the sweep) is never held up by a run's TensorFlow import.
- **follow**: :func:`follow`, the torn-line-safe, replacement-following reader of a run's events
  (gui_app/core/events_follow.py), the one ``attach`` streams from.
- **stop**: :func:`stop` and :func:`send`, the run's control channel (engine/run/control_fifo.py)
  here, ``replica-studio stop --host H RUN_DIR`` there; never a signal to a process id.
- **fork_session**: the one fork into a session of its own, for the run (``--detach``) and a
  sweep's own process (``sweep --detach``).

TensorFlow-free: the sweep and the scaling benchmark import it before any run does.
"""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from gui_app.core.events_follow import EventsFollower
from gui_app.engine.run import control_fifo
from gui_app.engine.run.exits import EXIT_FAILED, EXIT_OK, exit_now
from gui_app.identity import app_command, app_env


class StartFailed(Exception):
    """The run ended before it started (or its start could not be asked): its exit code and the
    line that says why."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code if code > 0 else EXIT_FAILED


@dataclass
class Starting:
    """A detached start on its way: the ``--detach`` process waits until its run has started."""

    process: subprocess.Popen
    out: Path  # its stdout: the run directory, once started
    log: Path  # its stderr: its error line, when the run ended before it started
    host: str | None = None

    def poll(self) -> Path | None:
        """The run directory once the run has started, None while it is starting;
        :class:`StartFailed` when it ended before."""
        code = self.process.poll()
        if code is None:
            return None
        run_dir = printed_run_dir(self.out)
        if code == EXIT_OK and run_dir is not None:
            return run_dir
        raise StartFailed(code, last_line(self.log) or f"the run's process ended before the run started (exit {code})")

    def wait(self, timeout: float | None = None) -> Path:
        self.process.wait(timeout)
        run_dir = self.poll()
        assert run_dir is not None  # (it has exited)
        return run_dir

    @property
    def pid(self) -> int:
        return self.process.pid


def start(args: list[str], *, out: Path, log: Path, host: str | None = None,
          env: dict[str, str] | None = None) -> Starting:
    """Start ``replica-studio ARGS --detach`` (``args`` begins with ``train`` or ``resume``), on
    SSH host ``host`` when given: its stdout appended to ``out``, its stderr to ``log``. The run
    itself logs to its run directory's ``engine.log`` (engine/run/presence.py)."""
    there = ["--host", host] if host else []
    with out.open("ab") as stdout, log.open("ab") as stderr:
        process = subprocess.Popen(app_command(*args, "--detach", *there), stdin=subprocess.DEVNULL,
                                   stdout=stdout, stderr=stderr, env=app_env(env or {}), start_new_session=True)
    return Starting(process, out, log, host)


def follow(run_dir: str | Path, events: Path | None = None, start_line: int = 0) -> EventsFollower:
    """The reader of a run's events from line ``start_line`` on: its ``events.jsonl``, or
    ``events`` when they are read elsewhere (an attachment's output for a run on an SSH host)."""
    follower = EventsFollower(run_dir, start_line)
    if events is not None:
        follower.path = events
    return follower


def send(run_dir: str | Path, word: str) -> bool:
    """Send a control word to the run here; False when no process runs it (any more)."""
    try:
        control_fifo.send(run_dir, word)
    except control_fifo.NotRunning:
        return False
    return True


def stop(run_dir: str | Path, host: str | None = None) -> bool:
    """Ask the run to stop with a checkpoint; False when it was not running here (or could not
    be reached: another user's run). On an SSH host, ``replica-studio stop --host H RUN_DIR``
    is started and not waited for (it waits there until the run has finished): True."""
    if host is None:
        try:
            return send(run_dir, "stop")
        except control_fifo.ChannelError:
            return False
    stopping = subprocess.Popen(app_command("stop", str(run_dir), "--host", host), stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=app_env(),
                                start_new_session=True)
    # Reaped when it ends, so that a long sweep does not collect a zombie per stopped trial.
    threading.Thread(target=stopping.wait, name="stop-there", daemon=True).start()
    return True


def fork_session(body: Callable[[], int], *, log: Path | None = None) -> int:
    """Fork; the child leaves the terminal (:func:`leave_the_terminal`), appends its stdout and
    stderr to ``log`` when given, runs ``body`` and exits with its code (a traceback, if any, in
    the log). Returns the child's process id to the parent. Fork before anything heavy is loaded:
    the child copies no thread."""
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    pid = os.fork()
    if pid == 0:
        _be_the_child(body, log)
    return pid


def _be_the_child(body: Callable[[], int], log: Path | None) -> None:
    code = EXIT_FAILED
    try:
        leave_the_terminal()
        if log is not None:
            fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            os.close(fd)
        code = body()
    except BaseException:  # noqa: BLE001 - the child must end here, never return into the parent's stack
        traceback.print_exc()
    exit_now(code)


def leave_the_terminal() -> None:
    """Make this (forked) process a session of its own: no controlling terminal, SIGHUP ignored,
    stdin, stdout and stderr on /dev/null (the run writes its log and events to files)."""
    import signal

    os.setsid()
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)


def printed_run_dir(out: Path) -> Path | None:
    """The run directory a ``--detach`` process printed to ``out`` (its last line), if it has."""
    line = last_line(out)
    return Path(line) if line else None


def last_line(path: Path) -> str | None:
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    return next((line.strip() for line in reversed(lines) if line.strip()), None)

