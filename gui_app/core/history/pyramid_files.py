"""The pyramid beside ``events.jsonl``: bringing it up to date with the events (caught up from
the offset it covers, or rebuilt when missing, damaged, of another version or of a replaced
events file), and reading the events themselves by byte offset and by step.

The events are decoded with gui_app.core.events (never matched as bytes), so whatever form a
step line takes, the pyramid reads it as the window does. Qt-free and TensorFlow-free.
"""
from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import BinaryIO, Iterator

from gui_app.core.events import EpochEnd, Event, RunStarted, Step, decode_line
from gui_app.core.history.pyramid import FOLDER, Meta
from gui_app.core.history.pyramid_writer import PyramidWriter

CHUNK = 1 << 20


def lines_from(f: BinaryIO, offset: int, stop: int | None = None) -> Iterator[tuple[bytes, int, int]]:
    """The complete lines of an open file from ``offset`` (before ``stop``), with where each
    starts and ends; a torn last line is left for the next read."""
    f.seek(offset)
    start, rest = offset, b""
    while stop is None or start < stop:
        chunk = f.read(CHUNK if stop is None else min(CHUNK, stop - start - len(rest)))
        if not chunk:
            return
        data = rest + chunk
        at = 0
        while True:
            newline = data.find(b"\n", at)
            if newline < 0:
                break
            yield data[at:newline + 1], start + at, start + newline + 1
            at = newline + 1
        start, rest = start + at, data[at:]


def events_from(f: BinaryIO, offset: int, stop: int | None = None,
                parts: bool = True) -> Iterator[tuple[Event, int, int]]:
    """The events of the complete lines from ``offset``, each with its line's offsets."""
    for line, start, end in lines_from(f, offset, stop):
        event = decode_line(line, parts)
        if event is not None:
            yield event, start, end


def _next_step(f: BinaryIO, offset: int) -> int | None:
    for event, _, _ in events_from(f, offset, parts=False):
        if isinstance(event, Step):
            return event.step
    return None


def step_offset(f: BinaryIO, step: int) -> int:
    """Where the first line of a step at or after ``step`` starts (the end of the file when
    none): a binary search, as the file holds its steps in order."""
    size = f.seek(0, os.SEEK_END)
    lo, hi = 0, size
    while hi - lo > 1 << 16:
        mid = (lo + hi) // 2
        f.seek(mid)
        f.readline()  # the rest of the line mid falls in
        found = _next_step(f, f.tell())
        if found is None or found >= step:
            hi = mid
        else:
            lo = mid
    f.seek(lo)
    if lo:
        f.readline()
    for event, start, _ in events_from(f, f.tell(), parts=False):
        if isinstance(event, Step) and event.step >= step:
            return start
    return size


def steps_between(path: Path, first: int, last: int, hint: int | None = None) -> Iterator[tuple[Event, int, int]]:
    """The ``step`` and ``epoch_end`` events of steps ``first..last``, from ``hint`` (where the
    first of them starts, when known) or found by :func:`step_offset`."""
    try:
        f = open(path, "rb")
    except OSError:
        return
    with f:
        offset = step_offset(f, first) if hint is None else hint
        for event, start, end in events_from(f, offset):
            if isinstance(event, RunStarted) and start != offset:
                return
            if isinstance(event, Step):
                if event.step > last:
                    return
                if event.step >= first:
                    yield event, start, end
            elif isinstance(event, EpochEnd) and first <= event.step <= last:
                yield event, start, end


def open_writer(run_dir: str | Path, events_path: str | Path, f: BinaryIO | None = None) -> PyramidWriter:
    """The pyramid's writer, caught up with every complete line of the events file (its own
    pyramid reopened and the lines after its offset folded, or a new one folded from the
    start). OSError when the run folder cannot be written."""
    path = Path(events_path)
    with (open(path, "rb") if f is None else contextlib.nullcontext(f)) as events:
        stat = os.fstat(events.fileno())
        meta = Meta.read(Path(run_dir) / FOLDER)
        if meta is not None and (meta.inode != stat.st_ino or meta.end > stat.st_size):
            meta = None
        writer = PyramidWriter(run_dir, stat.st_ino, meta,
                               recover=lambda first, last, hint: steps_between(path, first, last, hint))
        try:
            for event, start, end in events_from(events, writer.meta.offset):
                writer.add(event, start, end)
        except BaseException:
            writer.close()
            raise
    return writer


def update_pyramid(run_dir: str | Path, events_path: str | Path, write: bool = True) -> Meta | None:
    """The pyramid of a run, brought up to date with its events first (see :func:`open_writer`).
    ``write=False`` (a live run, whose engine keeps it) only reads it. None when the run has no
    events, or no usable pyramid that could be read or written. Two readers never write it at
    once: the second reads what is there (an flock on ``history/.lock``)."""
    folder = Path(run_dir) / FOLDER
    meta = Meta.read(folder)
    try:
        f = open(events_path, "rb")
    except OSError:
        return None
    with f, _writing(folder, write) as allowed:
        stat = os.fstat(f.fileno())
        if meta is not None and (meta.inode != stat.st_ino or meta.end > stat.st_size):
            meta = None
        if not allowed or (meta is not None and meta.end == stat.st_size):
            return meta
        try:
            writer = open_writer(run_dir, events_path, f)
        except OSError:  # a read-only run folder: the reader folds the events itself
            return None
        writer.close()
        return writer.meta


@contextlib.contextmanager
def _writing(folder: Path, wanted: bool) -> Iterator[bool]:
    """Whether this process may write the pyramid now: asked for, and no other reader is at it."""
    if not wanted:
        yield False
        return
    try:
        import fcntl
    except ImportError:  # Windows: no locking, as for the run's own lock
        yield True
        return
    try:
        folder.mkdir(exist_ok=True)
        fd = os.open(folder / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:  # a read-only run folder
        yield False
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        yield False
        return
    try:
        yield True
    finally:
        os.close(fd)  # drops the lock
