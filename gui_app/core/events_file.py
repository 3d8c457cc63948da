"""``events.jsonl`` as its one writer keeps it: each step once, in order, and no torn line.

Every view of a run replays this file (the run list, the charts, ``attach``, users' scripts), so
it must read as one clean history after any fault (docs/events.md, "The events file"):

- A line is one ``write(2)`` on an ``O_APPEND`` descriptor. A write that fails part way (a full
  disk) is cut back to where the line began, so a failed process leaves whole lines only.
- A process killed in the middle of a line (a power cut, or a fatal signal between two pages of
  one write) leaves a torn last line; the next writer cuts it off when it opens the file.
- A resumed run goes on from its checkpoint's step S, not from the last step written: when it
  starts, :meth:`EventsFile.keep_history_until` replaces the file (a new file, renamed over the
  old one) by its lines up to S -- every line but the ``step`` and ``epoch_end`` events after S
  and any line that is not a JSON object -- and the new process appends after them.

One process writes a run's events at a time (gui_app/core/run_lock.py). TensorFlow-free.
"""
from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import BinaryIO, Iterator

from gui_app.core import atomic_io

# The events that are points of the history, each numbered by its ``step``.
_POINTS = ("step", "epoch_end")


class EventsFile:
    """The run's events file, opened for appending by the process that holds the run."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._cut_torn_tail()

    def append(self, line: bytes) -> tuple[int, int]:
        """Write one event line (ending in a newline) whole, or raise leaving the file as it was;
        where the line starts and ends in the file."""
        size = os.fstat(self._fd).st_size
        try:
            written = os.write(self._fd, line)
            while written < len(line):  # a short write: a full disk, which the next write reports
                written += os.write(self._fd, line[written:])
        except OSError:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, size)  # shrinking needs no space
            raise
        return size, size + len(line)

    def inode(self) -> int:
        """The file's inode: a resumed run's :meth:`keep_history_until` makes a new file."""
        return os.fstat(self._fd).st_ino

    def sync(self) -> None:
        """Make every line written so far durable (at checkpoints and at the end of the run)."""
        os.fsync(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            with contextlib.suppress(OSError):  # nothing is buffered here: nothing is lost
                os.close(self._fd)
            self._fd = -1

    def keep_history_until(self, step: int) -> None:
        """Replace the file, atomically, by its lines without the points after ``step`` and
        without the lines that are not events; appending goes on in the new file. On an error
        (a disk too full for the copy) the file is left as it was and the error raised."""
        with atomic_io.atomic_path(self.path) as temp:
            with open(temp, "wb") as out, open(self.path, "rb") as old:
                out.writelines(kept_lines(old, step))
        self.close()
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)

    def _cut_torn_tail(self) -> None:
        """Cut off a last line without its newline (the process that wrote it died mid-line)."""
        size = os.fstat(self._fd).st_size
        if not size:
            return
        with open(self.path, "rb") as f:
            end = size
            while end > 0:
                start = max(0, end - 65536)
                f.seek(start)
                chunk = f.read(end - start)
                if end == size and chunk.endswith(b"\n"):
                    return
                newline = chunk.rfind(b"\n")
                if newline >= 0:
                    os.ftruncate(self._fd, start + newline + 1)
                    return
                end = start
        os.ftruncate(self._fd, 0)  # one torn line and nothing before it


def kept_lines(lines: BinaryIO | Iterator[bytes], step: int) -> Iterator[bytes]:
    """The lines of an events file that a run resumed at ``step`` keeps (see the module's docstring)."""
    for line in lines:
        try:
            value = json.loads(line)
        except ValueError:  # a torn line, or a line glued to the rest of one
            continue
        if not isinstance(value, dict):
            continue
        if value.get("type") in _POINTS and isinstance(value.get("step"), int) and value["step"] > step:
            continue
        yield line if line.endswith(b"\n") else line + b"\n"
