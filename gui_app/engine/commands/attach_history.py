"""``attach --history``: a long run's history from its pyramid, then its events from the byte the
pyramid covers (docs/detached.md, "attach --history").

A re-attachment used to replay ``events.jsonl`` from line 0: over ssh the whole file went over
the link (386 MB for 300,000 steps x 8 replicas in lean lines) and the window folded every line.
With ``--history`` attach first writes one ``history`` line (gui_app/core/history/wire.py) with
the buckets Open draws, then the lines after the pyramid's offset (at most its open bucket of
256 steps, and what the run wrote since its engine last wrote the pyramid's meta), then the live
tail: the bytes and the window's work no longer grow with the run's length. The history line
says the byte its events start at (``offset``): ``attach --from-byte OFFSET --from N`` goes on
after N of them, which is how the window attaches again after a dropped connection; it says the
file's inode too, which that attach passes as ``--inode``: a run resumed meanwhile has a new file
(its lines after the checkpoint dropped), where the byte and the count point at other lines, and
attach then exits 3 without a line, so the window asks for the history again. (A line
number would do as well, but finding it counts the file's newlines up to the offset: 1.4 s for
445 MB here, growing with the run.)

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


class HistoryStart(NamedTuple):
    line: bytes  # the history line, with its newline
    offset: int  # where the events that follow it start in events.jsonl
    inode: int  # events.jsonl's, the file ``offset`` is a byte of


def history_start(run_dir: Path) -> HistoryStart | None:
    """The history line of a long run and the byte its events go on from; None for a run to
    replay whole (short, or no pyramid to be had)."""
    long = rundir.read_long_run(run_dir)
    if long is None:
        return None
    offset, inode = long.meta.offset, long.meta.inode
    path = run_dir / rundir.EVENTS_FILE
    if not_the_file(path, inode) or line_start_problem(path, offset):  # the file was replaced meanwhile
        return None
    value = wire.encode_history(long.buckets(), long.started, rundir.summarize_events(run_dir).started, offset,
                                inode)
    return HistoryStart(json.dumps(value, separators=(",", ":")).encode("utf-8") + b"\n", offset, inode)


def not_the_file(path: Path | int, inode: int) -> str | None:
    """Why ``path`` (or an open descriptor of it) is not the events file whose inode was
    ``inode`` (None when it is): a resumed run replaced it by a new file (gui_app/core/events_file.py),
    in which a byte and a line count of the old one point at other lines."""
    try:
        found = os.fstat(path).st_ino if isinstance(path, int) else os.stat(path).st_ino
    except OSError as exc:
        return f"cannot read the events file: {exc.strerror or exc}"
    if found != inode:
        return f"the events file was replaced since (inode {found}, not {inode}: the run was resumed?)"
    return None


def line_start_problem(path: Path, offset: int) -> str | None:
    """Why byte ``offset`` of ``path`` is no line's start (None when it is): past the end, or
    inside a line (a resumed run replaced the file since the offset was read from it)."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if offset < 0 or offset > size:
                return f"{path} has {size} bytes; got {offset}"
            if offset:
                f.seek(offset - 1)
                if f.read(1) != b"\n":
                    return f"byte {offset} of {path} does not start a line (the file was replaced since?)"
    except OSError as exc:
        return f"cannot read {path}: {exc.strerror or exc}"
    return None
