"""One writer per run directory: ``train``, ``resume``, ``evaluate`` and ``export`` hold an
exclusive ``fcntl.flock`` on ``RUN_DIR/.lock`` while they work.

Two resumes of one run (two windows, or a window and a terminal) would append the same steps
and overwrite each other's checkpoints. The kernel drops a flock when its process dies, however
it dies, so a lock left by a killed process is taken over without any stale-lock guessing; the
pid inside the file is only for the message. TensorFlow-free. (No locking where ``fcntl`` does
not exist: Windows.)
"""
from __future__ import annotations

import os
from pathlib import Path

LOCK_FILE = ".lock"


class RunInUse(ValueError):
    """Another process holds the run directory: bad input, exit code 2."""


class RunLock:
    """``with RunLock(run_dir):`` -- raises :class:`RunInUse` at once when another process holds it."""

    def __init__(self, run_dir: str | Path) -> None:
        self.path = Path(run_dir) / LOCK_FILE
        self._fd: int | None = None

    def acquire(self) -> RunLock:
        try:
            import fcntl
        except ImportError:  # Windows
            return self
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = _read_pid(fd)
            os.close(fd)
            who = f"process {holder}" if holder else "another process"
            raise RunInUse(f"run {self.path.parent} is in use by {who}") from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing drops the flock; the file stays (unlinking would race)
            self._fd = None

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *exc_info) -> None:
        self.release()


def held_by(run_dir: str | Path) -> int | None:
    """The process that holds ``run_dir`` now (its pid, or -1 when the file names none); None when
    no process does. Only for folders this process does not hold (a flock taken here would count).
    A sweep asks this of its trials' runs, which no one else starts."""
    try:
        import fcntl
    except ImportError:  # Windows: no locks, so none is held
        return None
    try:
        fd = os.open(Path(run_dir) / LOCK_FILE, os.O_RDONLY)
    except OSError:  # no lock file: never locked
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return _read_pid(fd) or -1
    else:
        return None
    finally:
        os.close(fd)  # drops the shared lock at once


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        return int(text) if text.isdigit() else None
    except OSError:
        return None
