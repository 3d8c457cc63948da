"""One writer per run directory: ``train``, ``resume``, ``evaluate`` and ``export`` hold an
exclusive ``fcntl.flock`` on ``RUN_DIR/.lock`` while they work.

Two resumes of one run (two windows, or a window and a terminal) would append the same steps
and overwrite each other's checkpoints. The kernel drops a flock when its process dies, however
it dies, so a lock left by a killed process is taken over without any stale-lock guessing; the
pid inside the file is only for the message. The same lock tells a live run from one whose
process is gone (:func:`holder`): ``attach``, ``stop`` and ``runs`` ask it. TensorFlow-free. (No
locking where ``fcntl`` does not exist: Windows.)
"""
from __future__ import annotations

import os
import time
from pathlib import Path

LOCK_FILE = ".lock"
# How long acquire() retries: holder() takes a shared lock for a moment to look.
_ACQUIRE_SECONDS = 0.2


class RunInUse(ValueError):
    """Another process holds the run directory: bad input, exit code 2."""


class RunLock:
    """``with RunLock(run_dir):`` -- raises :class:`RunInUse` when another process holds it (at
    once: within 0.2 s, as a reader that looks with :func:`holder` holds it for microseconds)."""

    def __init__(self, run_dir: str | Path) -> None:
        self.path = Path(run_dir) / LOCK_FILE
        self._fd: int | None = None

    def acquire(self) -> RunLock:
        try:
            import fcntl
        except ImportError:  # Windows
            return self
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
        deadline = time.monotonic() + _ACQUIRE_SECONDS
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError:
                if time.monotonic() < deadline:
                    time.sleep(0.01)
                    continue
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


def holder(run_dir: str | Path) -> int | None:
    """The id of the process that holds the run (0 when its id cannot be read), or None when no
    process holds it. Looks by taking a shared lock for a moment, never the exclusive one."""
    try:
        import fcntl
    except ImportError:  # Windows: nothing is locked, so nothing is known
        return None
    try:
        fd = os.open(Path(run_dir) / LOCK_FILE, os.O_RDONLY)
    except OSError:  # no lock file: never held
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return _read_pid(fd) or 0
    else:
        return None
    finally:
        os.close(fd)  # drops the shared lock when it was taken


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        return int(text) if text.isdigit() else None
    except OSError:
        return None
