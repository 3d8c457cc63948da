"""Following a file as it is written, line by line: the one reader behind ``attach`` (events.jsonl),
``log`` and the window's Log tab (engine.log, a Slurm job's output), the Kubernetes copy, the run
list's summary (core/run_summary.py) and a sweep's trials (engine/run/process.py's ``follow``).

:class:`LineFollower` hands out the complete lines of one file (each with its newline) written
since the last :meth:`~LineFollower.read`, from a byte (``start_byte``: what a reader had before)
and after a number of lines (``start_line``: counted from that byte, read but not handed out).
It keeps following when its writer changes the file under the reader (gui_app/core/events_file.py
says when):

- a torn last line is never handed out until its newline is there; when the next writer cuts it
  off, reading goes on where the cut left the file (:meth:`~LineFollower.take_pending` hands the
  torn line out at once, for a reader that shows bytes as they come: a progress bar's ``\\r``);
- when the file is replaced (a new file renamed over it: a new inode, as a resumed run's history
  is), reading goes on in the new file after the lines already read that it kept: the old lines
  read so far are matched, in order, against the new file's first lines. Line counts then count
  the new file's lines, and :attr:`~LineFollower.offset` is a byte of the new file.

A subclass chooses which lines are handed out with :meth:`~LineFollower.keep` (it sees every
complete line, in order, once). The file may not exist yet: reading it then gives nothing.
Open descriptors, not paths, are read, so nothing is missed between a stat and a read.
TensorFlow-free, Qt-free.
"""
from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

_CHUNK = 1 << 20


class LineFollower:
    def __init__(self, path: str | Path, start_line: int = 0, start_byte: int = 0) -> None:
        self.path = Path(path)
        self.start_line = start_line
        self.lines_read = 0  # complete lines read from start_byte on (handed out or not)
        self._fd = -1
        self._offset = start_byte  # where the complete lines read so far end
        self._pending = b""  # a line still being written

    @property
    def offset(self) -> int:
        """The byte after the last complete line read (a torn line taken counts as read)."""
        return self._offset

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> LineFollower:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def open(self) -> int | None:
        """The open file's descriptor, opened now when it is not yet (None while there is no
        file): a reader looks at its inode or size before it reads on (:meth:`skip_to`)."""
        if self._fd < 0:
            try:
                self._fd = os.open(self.path, os.O_RDONLY)
            except FileNotFoundError:
                return None
        return self._fd

    def skip_to(self, byte: int) -> None:
        """Read on from ``byte``, the start of a line: the reader has what comes before it (a
        cache of its fold) or wants the file's tail only."""
        self._offset, self._pending = byte, b""

    def read(self, max_bytes: int | None = None) -> list[bytes]:
        """The lines written since the last call, each with its newline (none yet: []); with
        ``max_bytes``, a first part of them, about that many bytes (the next call goes on): a
        reader that writes them on holds a few MB, not a file of GBs."""
        if self.open() is None:
            return []
        out = self._read_new(max_bytes)
        if not out and self._replaced():
            out = self._read_new(max_bytes)
        return out

    def read_ends(self) -> list[tuple[bytes, int]]:
        """:meth:`read` with the byte each line ends at (the ``--from`` of a reader going on after it)."""
        lines = self.read()
        end = self._offset - sum(map(len, lines))
        out = []
        for line in lines:
            end += len(line)
            out.append((line, end))
        return out

    def take_pending(self) -> bytes:
        """The torn last line read so far (b"" when none), counted as read: a reader that shows
        bytes as they come, or the last read of a file whose writer is gone."""
        pending, self._pending = self._pending, b""
        self._offset += len(pending)
        return pending

    def keep(self, line: bytes) -> bool:
        """Whether a complete line past ``start_line`` is handed out (a subclass filters and folds here)."""
        return True

    def skip(self, line: bytes) -> None:
        """A complete line up to ``start_line``, read but not handed out (a subclass that folds
        sees it here; it may look at it more cheaply than :meth:`keep`)."""
        self.keep(line)

    def _read_new(self, max_bytes: int | None = None) -> list[bytes]:
        if self._pending and os.pread(self._fd, len(self._pending), self._offset) != self._pending:
            self._pending = b""  # the torn line was cut off (and maybe something else written there)
        out: list[bytes] = []
        size = 0  # of the lines handed out: lines skipped (before start_line) do not count
        while max_bytes is None or size < max_bytes:
            data = os.pread(self._fd, _CHUNK, self._offset + len(self._pending))
            if not data:
                return out
            data = self._pending + data
            end = data.rfind(b"\n") + 1
            self._pending = data[end:]
            if end:
                self._offset += end
                for line in data[:end].splitlines(keepends=True):
                    self.lines_read += 1
                    if self.lines_read <= self.start_line:
                        self.skip(line)
                    elif self.keep(line):
                        out.append(line)
                        size += len(line)
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


def file_lines(fd: int, end: int | None = None) -> Iterator[bytes]:
    """The complete lines of the open file ``fd`` from its start (up to byte ``end``), each with its newline."""
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
    new = file_lines(new_fd)
    candidate = next(new, None)
    matched_bytes = matched_lines = 0
    for line in file_lines(old_fd, old_end):
        if candidate is not None and line == candidate:
            matched_bytes += len(line)
            matched_lines += 1
            candidate = next(new, None)
    return matched_bytes, matched_lines


def count_lines(path: str | Path) -> int:
    """The complete lines of the file at ``path`` now (0 when there is none): where a follower
    that starts after them begins (``start_line``), or what a copy has already."""
    try:
        with open(path, "rb") as f:
            return sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(_CHUNK), b""))
    except OSError:
        return 0
