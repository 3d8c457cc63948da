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
counted but not handed out. The reading itself is gui_app/core/line_follow.py's; this adds the
events' own folding. TensorFlow-free.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import BinaryIO

from gui_app.core.line_follow import LineFollower
from gui_app.core.rundir import EVENTS_FILE

_CHUNK = 1 << 20


class EventsFollower(LineFollower):
    def __init__(self, run_dir: str | Path, start_line: int = 0, start_byte: int = 0):
        super().__init__(Path(run_dir) / EVENTS_FILE, start_line, start_byte)
        self.events_read = 0  # event lines read so far (handed out or not)
        self.finished = False  # the last run_started read has its run_finished (as history/status.py folds)

    def keep(self, line: bytes) -> bool:
        try:
            value = json.loads(line)
        except ValueError:
            return False
        if not isinstance(value, dict):
            return False
        self.events_read += 1
        kind = value.get("type")
        if kind in ("run_started", "run_finished"):
            self.finished = kind == "run_finished"
        return True

    def skip(self, line: bytes) -> None:
        """A line before ``start_line`` is parsed only when it may start or end a run: skipping the
        million step lines of a 5.5 GB run (32 replicas) took 57 s parsing each, 9 s so."""
        if b'"run_started"' in line or b'"run_finished"' in line:
            self.keep(line)
        elif line.startswith(b"{"):
            self.events_read += 1



def last_start(run_dir: str | Path) -> tuple[int, int]:
    """The line of ``events.jsonl`` that holds its last run_started and the byte it starts at
    ((0, 0) when none): where a resumed run's own events begin. Read in chunks from the end,
    then its newlines counted up to there: a few MB of memory for a file of GBs."""
    try:
        with open(Path(run_dir) / EVENTS_FILE, "rb") as f:
            at = _last_at(f, b'"run_started"')
            if at < 0:
                return 0, 0
            f.seek(0)
            newlines, start, read = 0, 0, 0
            while read < at and (chunk := f.read(min(_CHUNK, at - read))):
                newlines += chunk.count(b"\n")
                if (last := chunk.rfind(b"\n")) >= 0:
                    start = read + last + 1
                read += len(chunk)
            return newlines, start
    except OSError:
        return 0, 0


def _last_at(f: BinaryIO, needle: bytes) -> int:
    """The byte where ``needle`` last stands in the file (-1: nowhere), read backwards in chunks."""
    end, carry = f.seek(0, os.SEEK_END), b""
    while end > 0:
        start = max(0, end - _CHUNK)
        f.seek(start)
        data = f.read(end - start) + carry
        found = data.rfind(needle)
        if found >= 0:
            return start + found
        carry, end = data[:len(needle) - 1], start  # a needle across the chunks' edge
    return -1
