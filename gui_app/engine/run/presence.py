"""What a ``train`` or ``resume`` process keeps in its run directory while it holds the run:
``process.json`` (who and where it is: gui_app/core/live_runs.py), the control channel
(engine/run/control_fifo.py), and, for a detached run, its output in ``engine.log``.

None of them is needed to train: a run directory where they cannot be made (a file system
without named pipes, a full disk) still trains, and each failure is a warning event.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

from gui_app.core.live_runs import record_process
from gui_app.core.rundir import LOG_FILE
from gui_app.engine.run.control import Control
from gui_app.engine.run.control_fifo import ControlChannel


class RunPresence:
    def __init__(self, run_dir: Path, command: str, detached: bool, debug: bool):
        self.run_dir, self.command, self.detached, self.debug = run_dir, command, detached, debug
        self.channel: ControlChannel | None = None
        self.warnings: list[str] = []

    def open(self, control: Control) -> RunPresence:
        if self.detached:
            try:
                log_output(self.run_dir / LOG_FILE, self.debug)
            except OSError as exc:
                self.warnings.append(f"no {LOG_FILE} for this detached run: {exc.strerror or exc}")
        try:
            self.channel = ControlChannel(self.run_dir, control).open()
        except OSError as exc:
            self.warnings.append(f"no control channel in {self.run_dir} ({exc.strerror or exc}): "
                                 "attach and stop cannot reach this run; stop it with SIGTERM")
        try:
            record_process(self.run_dir, self.command, self.detached)
        except OSError as exc:
            self.warnings.append(f"cannot record this process in {self.run_dir} ({exc.strerror or exc}): "
                                 "'replica-studio runs' will not show it as running")
        return self

    def close(self) -> None:
        if self.channel is not None:
            self.channel.close()


def log_output(path: Path, debug: bool) -> None:
    """Point this detached process's stdout and stderr (on /dev/null until now: engine/run/detach.py)
    at ``path``, appended (a resumed run adds to it), TensorFlow's own log lines filtered out as
    on a terminal (engine/run/quiet.py)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    if debug:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    else:
        from gui_app.engine.run.quiet import silence_tensorflow_logs

        silence_tensorflow_logs()
