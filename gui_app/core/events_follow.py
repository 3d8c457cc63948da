"""Following a run's ``events.jsonl`` as it is written: what ``attach`` streams.

:class:`EventsFollower` hands out the file's complete lines from line N on (0-based, counting
the lines of the file), and keeps following when its writer changes it under the reader
(gui_app/core/events_file.py says when):

- a torn last line that the next writer cuts off is never handed out (only lines with their
  newline are), and reading goes on where the cut left the file;
- when a resumed run replaces the file by its history up to its checkpoint (a new file renamed
  over the old one: a new inode), reading goes on in the new file after the lines already read:
  the new file's first lines are the old file's lines minus the dropped ones, in their order and
  byte for byte, so the old lines read so far are matched against them in order. Line numbers
  then count the new file's lines.

Lines that are not JSON objects (written by versions before the file was kept clean) are
counted but not handed out. TensorFlow-free.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from gui_app.core.rundir import EVENTS_FILE

_CHUNK = 1 << 20


class EventsFollower:
    def __init__(self, run_dir: str | Path, start_line: int = 0):
        self.path = Path(run_dir) / EVENTS_FILE
        self.start_line = start_line
        self.lines_read = 0  # complete lines of the current file read so far (handed out or not)
        self.events_read = 0  # event lines read so far (handed out or not)
        self.finished = False  # the last run_started read has its run_finished (as history/status.py folds)
        self._fd = -1
        self._offset = 0  # where the complete lines read so far end
        self._pending = b""  # a line still being written

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def read(self) -> list[bytes]:
        """The event lines written since the last call, each with its newline (none yet: [])."""
        if self._fd < 0:
            try:
                self._fd = os.open(self.path, os.O_RDONLY)
            except FileNotFoundError:
                return []
        out = self._read_new()
        if not out and self._replaced():
            out = self._read_new()
        return out

    def _read_new(self) -> list[bytes]:
        if self._pending and os.pread(self._fd, len(self._pending), self._offset) != self._pending:
            self._pending = b""  # the torn line was cut off (and maybe something else written there)
        out: list[bytes] = []
        while True:
            data = os.pread(self._fd, _CHUNK, self._offset + len(self._pending))
            if not data:
                return out
            data = self._pending + data
            end = data.rfind(b"\n") + 1
            self._pending = data[end:]
            if end:
                self._offset += end
                out += self._take(data[:end].splitlines(keepends=True))

    def _take(self, lines: list[bytes]) -> list[bytes]:
        out = []
        for line in lines:
            self.lines_read += 1
            try:
                value = json.loads(line)
            except ValueError:
                continue
            if not isinstance(value, dict):
                continue
            self.events_read += 1
            kind = value.get("type")
            if kind in ("run_started", "run_finished"):
                self.finished = kind == "run_finished"
            if self.lines_read > self.start_line:
                out.append(line)
        return out

    def _replaced(self) -> bool:
        """Switch to a new file renamed over the one being read; True when it did."""
        try:
            new_fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:  # removed (a run refused before it trained): nothing more comes
            return False
        if os.fstat(new_fd).st_ino == os.fstat(self._fd).st_ino:
            os.close(new_fd)
            return False
        matched_bytes, matched_lines = _matched_prefix(self._fd, self._offset, new_fd)
        self.close()
        self._fd, self._offset, self._pending = new_fd, matched_bytes, b""
        self.lines_read = matched_lines
        return True


def _lines(fd: int, end: int | None = None):
    """The complete lines of ``fd`` (up to byte ``end``)."""
    offset, rest = 0, b""
    while end is None or offset < end:
        data = os.pread(fd, _CHUNK if end is None else min(_CHUNK, end - offset), offset)
        if not data:
            break
        offset += len(data)
        *lines, rest = (rest + data).split(b"\n")
        for line in lines:
            yield line + b"\n"


def _matched_prefix(old_fd: int, old_end: int, new_fd: int) -> tuple[int, int]:
    """How many bytes and lines of the new file are the old file's lines read so far (its
    first ``old_end`` bytes) that the new file kept: the old lines in order, each matched when it
    is the new file's next line."""
    new = _lines(new_fd)
    candidate = next(new, None)
    matched_bytes = matched_lines = 0
    for line in _lines(old_fd, old_end):
        if candidate is not None and line == candidate:
            matched_bytes += len(line)
            matched_lines += 1
            candidate = next(new, None)
    return matched_bytes, matched_lines
