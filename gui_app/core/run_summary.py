"""The run list's cache of each run's status, ``summary.json``: the fold of its events
(gui_app.core.history.status.RunStatus) and the byte offset of ``events.jsonl`` it covers, so a
look at a run reads only what was appended since. The engine writes it as the run goes
(gui_app/engine/run/records.py); a reader catches it up. Without one (an old run, a copy), a
large events file is read at its two ends only. TensorFlow-free.
"""
from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

from gui_app.core import atomic_io
from gui_app.core.event_codec import build
from gui_app.core.events import RunStarted, decode_line
from gui_app.core.history.status import RunStatus
from gui_app.core.line_follow import LineFollower

EVENTS_FILE = "events.jsonl"
SUMMARY_FILE = "summary.json"  # a cache of what the run list shows, rebuilt from the events

# The run list's status of each run (history.status.RunStatus), cached in SUMMARY_FILE with the
# byte offset read so far and the events file's inode, so listing 1,000 runs reads only what was
# appended since. Version 4: the inode (a resumed run replaces the file: events_file.py).
_SUMMARY_VERSION = 4
_STATUS_FIELDS = {f.name for f in dataclasses.fields(RunStatus)}


def _read_summary(run_dir: Path, inode: int) -> tuple[RunStatus, int]:
    """The cached status and its offset, or a fresh status at 0 when the cache is missing,
    unusable, or of another events file."""
    try:
        cached = json.loads((run_dir / SUMMARY_FILE).read_text(encoding="utf-8"))
        if (cached.get("version") == _SUMMARY_VERSION and cached.get("inode") == inode
                and set(cached["state"]) == _STATUS_FIELDS):
            status = build(RunStatus, cached["state"])
            if status is not None:
                return status, int(cached["offset"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        pass
    return RunStatus(), 0


# Without a usable summary.json (an old run, a copy, a run from a host) a file larger than
# this is read at its two ends only: the run list's first look at a week-long run must not fold
# hundreds of MB. The head gives the first run_started (when the run started, its steps), the
# tail the last steps, evaluation and run_finished (a process's last words).
_ENDS_BYTES = 1 << 20


def summarize_events(run_dir: str | Path) -> RunStatus:
    """How the run stands by its events. Reads only the lines appended since the cached summary
    (rebuilt when the events file was replaced, or is shorter than the cache says; from the
    file's two ends when it is large, see :data:`_ENDS_BYTES`), through the one line follower
    (gui_app/core/line_follow.py): a torn last line is read next time, once it is complete."""
    run_dir = Path(run_dir)
    try:
        with LineFollower(run_dir / EVENTS_FILE) as follower:
            fd = follower.open()
            if fd is None:  # no events yet
                return RunStatus()
            stat = os.fstat(fd)
            status, offset = _read_summary(run_dir, stat.st_ino)
            if offset > stat.st_size:
                status, offset = RunStatus(), 0
            if offset == 0 and stat.st_size > 2 * _ENDS_BYTES:
                status, offset = _first_start(fd), _tail_start(fd, stat.st_size - _ENDS_BYTES)
            follower.skip_to(offset)
            lines = follower.read()
            for line in lines:
                event = decode_line(line, parts=False)  # the status needs no replicas
                if event is not None:
                    status.add(event)
            if follower.open() != fd:  # a resume renamed a new file over it meanwhile: fold that one
                return summarize_events(run_dir)
            if lines:
                write_summary(run_dir, status, follower.offset, stat.st_ino)
    except OSError:  # unreadable: as if it had no events yet
        return RunStatus()
    return status


def _first_start(fd: int) -> RunStatus:
    """The status after the first ``run_started`` among the file's first :data:`_ENDS_BYTES`."""
    status = RunStatus()
    head = os.pread(fd, _ENDS_BYTES, 0)
    for line in head[:head.rfind(b"\n") + 1].splitlines():
        event = decode_line(line, parts=False)
        if isinstance(event, RunStarted):
            status.add(event)
            break
    return status


def _tail_start(fd: int, at: int) -> int:
    """Where the first whole line at or after byte ``at`` starts."""
    at -= 1  # (a line that starts at ``at`` follows the newline before it)
    while data := os.pread(fd, 1 << 16, at):
        newline = data.find(b"\n")
        if newline >= 0:
            return at + newline + 1
        at += len(data)
    return at


def write_summary(run_dir: Path, status: RunStatus, offset: int, inode: int) -> None:
    """Cache ``status``, folded from the events file (``inode``) up to byte ``offset``: the
    engine writes it as the run goes, a reader after folding what was appended since."""
    summary = {"version": _SUMMARY_VERSION, "offset": offset, "inode": inode, "state": dataclasses.asdict(status)}
    try:  # not fsynced: a cache lost with a power cut is rebuilt from the events
        atomic_io.write_text(run_dir / SUMMARY_FILE, json.dumps(summary), durable=False)
    except OSError:  # a read-only or full disk: the cache is only a cache
        pass
