"""A run's control channel: ``RUN_DIR/.control/fifo``, a named pipe only the run's owner can open.

Every ``train`` and ``resume`` process reads control words from it (``stop``, ``pause``,
``continue``, ``checkpoint``; engine/run/control.py), detached or not, so ``attach`` and ``stop``
control a run whoever started it. A FIFO, not a socket: no port, nothing to authenticate (the
folder is 0700 and the pipe 0600, so another user cannot even reach it; the superuser can, as
with everything), no 108-byte path limit (run directories can be deep), and a write of one
short line is atomic (POSIX: up to PIPE_BUF bytes), so several attachments never mix words.

The run opens the pipe for reading and writing: it then never sees an end of input when a
writer closes it, and a writer's non-blocking open fails with ENXIO once no process reads it
(the run is gone). docs/detached.md describes the channel.
"""
from __future__ import annotations

import contextlib
import errno
import os
import stat
import threading
from pathlib import Path

from gui_app.engine.run.control import COMMANDS, Control

CHANNEL_DIR = ".control"
FIFO_NAME = "fifo"
_MAX_WORD = 64  # far below PIPE_BUF (512 bytes at least): one write, never interleaved


class ChannelError(ValueError):
    """A word could not be sent: the message says why (bad input, exit code 2)."""


class NotRunning(ChannelError):
    """No process reads the run's channel: the run is not running."""


def fifo_path(run_dir: str | Path) -> Path:
    return Path(run_dir) / CHANNEL_DIR / FIFO_NAME


class ControlChannel:
    """The run's end: made when the process takes the run, read on a thread, removed at the end."""

    def __init__(self, run_dir: str | Path, control: Control):
        self.path, self.control = fifo_path(run_dir), control
        self._fd = -1
        self._closing = False

    def open(self) -> ControlChannel:
        """Make the pipe (a stale one from a killed process is replaced) and start reading it.
        OSError when the file system cannot hold a pipe, or the folder is not ours."""
        folder = self.path.parent
        folder.mkdir(mode=0o700, exist_ok=True)
        if folder.is_symlink() or folder.stat().st_uid != os.getuid():
            raise OSError(errno.EPERM, "the folder is not this user's own", str(folder))
        folder.chmod(0o700)
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        os.mkfifo(self.path, 0o600)
        self.path.chmod(0o600)  # mkfifo's mode is cut by the umask, never widened
        self._fd = os.open(self.path, os.O_RDWR | getattr(os, "O_CLOEXEC", 0))
        threading.Thread(target=self._read, name="control-channel", daemon=True).start()
        return self

    def close(self) -> None:
        """Remove the pipe (a writer then finds no run) and end the reading thread."""
        if self._fd < 0:
            return
        with contextlib.suppress(OSError):
            self.path.unlink()
            self.path.parent.rmdir()
        self._closing = True
        with contextlib.suppress(OSError):
            os.write(self._fd, b"\n")  # wakes the thread, which closes the descriptor

    def _read(self) -> None:
        pending = b""
        while not self._closing:
            try:
                data = os.read(self._fd, 4096)
            except OSError:
                break
            *lines, pending = (pending + data).split(b"\n")
            for line in lines:
                if not self._closing:
                    self.control.command(line.decode("utf-8", "replace"))
            pending = pending[-_MAX_WORD:]
        os.close(self._fd)
        self._fd = -1


def send(run_dir: str | Path, word: str) -> None:
    """Send one control word to the run in ``run_dir``; :class:`NotRunning` when no process
    reads its channel, :class:`ChannelError` when it cannot be reached (another user's run)."""
    word = word.strip()
    if word.lower() not in (*COMMANDS, "resume"):
        raise ChannelError(f"unknown control word {word!r} (one of: {', '.join(COMMANDS)})")
    path = fifo_path(run_dir)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise NotRunning(f"{run_dir} is not running") from None
    except PermissionError:
        raise ChannelError(f"{run_dir}: its control channel is not yours ({path} belongs to another user)") from None
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # a pipe nobody reads: its process is gone
            raise NotRunning(f"{run_dir} is not running") from None
        raise ChannelError(f"{run_dir}: cannot open its control channel {path}: {exc.strerror}") from None
    try:
        if not stat.S_ISFIFO(os.fstat(fd).st_mode):
            raise ChannelError(f"{run_dir}: {path} is not a control channel (not a named pipe)")
        os.write(fd, word.encode() + b"\n")
    except BlockingIOError:  # 64 KiB of words it has not read: it is stuck, not gone
        raise ChannelError(f"{run_dir}: its control channel is full (the run reads no words)") from None
    finally:
        os.close(fd)
