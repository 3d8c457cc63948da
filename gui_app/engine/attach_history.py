"""``attach --history``: a long run's history from its pyramid, then its events from the byte the
pyramid covers (docs/detached.md, "attach --history").

A re-attachment used to replay ``events.jsonl`` from line 0: over ssh the whole file went over
the link (386 MB for 300,000 steps x 8 replicas in lean lines) and the window folded every line.
With ``--history`` attach first writes one ``history`` line (gui_app/core/history/wire.py) with
the buckets Open draws, then the lines after the pyramid's offset (at most its open bucket of
256 steps, and what the run wrote since its engine last wrote the pyramid's meta), then the live
tail: the bytes and the window's work no longer grow with the run's length.

The pyramid is the one Open reads (rundir.read_long_run): a run of a version that kept none (or
whose pyramid is stale) gets it built here first, on the host, unless a process runs it (its
engine keeps it; a run of an older engine that keeps none is replayed whole). A short run has no
history line: its events are replayed from line 0, as without ``--history``. Qt-free, no
TensorFlow.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import NamedTuple

from gui_app.core import rundir
from gui_app.core.history import wire

CHUNK = 4 << 20


class HistoryStart(NamedTuple):
    line: bytes  # the history line, with its newline
    offset: int  # where the events that follow it start in events.jsonl


def history_start(run_dir: Path) -> HistoryStart | None:
    """The history line of a long run and the byte its events go on from; None for a run to
    replay whole (short, or no pyramid to be had)."""
    long = rundir.read_long_run(run_dir)
    if long is None:
        return None
    offset = long.meta.offset
    lines = count_lines(run_dir / rundir.EVENTS_FILE, offset)
    if lines is None:
        return None
    value = wire.encode_history(long.buckets(), long.started, rundir.summarize_events(run_dir).started, lines)
    return HistoryStart(json.dumps(value, separators=(",", ":")).encode("utf-8") + b"\n", offset)


def count_lines(path: Path, end: int) -> int | None:
    """The lines of ``path`` before byte ``end`` (where a line starts), so that ``attach --from``
    that number goes on after them: the one part that reads the file up to the offset, at the
    disk's speed and without decoding (0.2 s for 386 MB from the page cache here). None when
    ``end`` is not a line's start (the file was replaced meanwhile)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        count, at = 0, 0
        while at < end:
            data = os.pread(fd, min(CHUNK, end - at), at)
            if not data:
                return None
            count += data.count(b"\n")
            at += len(data)
        if end and os.pread(fd, 1, end - 1) != b"\n":
            return None
        return count
    finally:
        os.close(fd)
