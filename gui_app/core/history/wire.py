"""The ``history`` line of ``attach --history`` (docs/detached.md): a long run's pyramid buckets
as one JSON line, so a re-attachment over SSH carries a few hundred KB whatever the run's length,
and the window folds them as Open folds them (coarse.long_history): the same curves.

The line holds the buckets Open would draw (coarse.buckets over the whole run), the run's latest
``run_started`` (the devices its lean step lines refer to), the first one's time, and ``offset``:
the byte of ``events.jsonl`` the events that follow it start at (``attach --from-byte OFFSET
--from N`` goes on after N of them), and ``inode``, the file's (``attach --inode INODE`` says when
a resumed run has replaced it since). The records travel as they are on disk (pyramid.record_dtype), minus
what no reader of a view uses (each column's first value), compressed with zlib after a byte
shuffle (each float's bytes grouped with the same byte of its neighbours: neighbouring buckets
share exponents and high bytes), in base64.

Why a line of its own and not made-up step lines: a bucket is folded as two steps (its min and
its max) plus the step-time split's rows, which no step line can say, and an attach stream read by
a script must not show made-up steps: the line comes only when asked for. Qt-free.
"""
from __future__ import annotations

import base64
import binascii
import zlib
from dataclasses import dataclass
from typing import Any

import numpy as np

from gui_app.core.events import RunStarted, decode, encode
from gui_app.core.history.coarse import Buckets
from gui_app.core.history.pyramid import FIRST, record_dtype

TYPE = "history"
VERSION = 1
LEVEL = 6  # zlib: level 9 took twice the time for 1 % fewer bytes on a 300,000 x 8 run


@dataclass
class HistoryHead:
    """What a ``history`` line says."""

    view: Buckets
    started: RunStarted | None
    first_started: float | None
    offset: int
    inode: int = 0  # the events file's inode ``offset`` was counted in (0: not said)


def encode_history(view: Buckets, started: RunStarted | None, first_started: float | None, offset: int,
                   inode: int = 0) -> dict:
    """The ``history`` line's JSON object; ``inode``: the events file's, the one ``offset`` is a
    byte of (a resumed run replaces the file: ``attach --inode`` tells the two apart)."""
    records = view.records.copy()
    records["stats"][:, :, FIRST] = 0.0  # unused by the views: zeros cost nothing compressed
    raw = records.tobytes()
    width = records.dtype.itemsize
    shuffled = np.frombuffer(raw, np.uint8).reshape(-1, width).T.tobytes() if len(records) else b""
    return {"type": TYPE, "version": VERSION, "offset": offset, "inode": inode, "columns": view.columns,
            "count": len(records),
            "records": base64.b64encode(zlib.compress(shuffled, LEVEL)).decode("ascii"),
            "started": encode(started) if started is not None else None, "first_started": first_started}


def decode_history(value: dict[str, Any]) -> HistoryHead:
    """A ``history`` line's content; ValueError when it is not one this version reads."""
    if value.get("type") != TYPE or value.get("version") != VERSION:
        raise ValueError(f"not a history line of version {VERSION}")
    try:
        columns = [str(name) for name in value["columns"]]
        count, offset, inode = int(value["count"]), int(value["offset"]), int(value.get("inode") or 0)
        dtype = record_dtype(len(columns))
        data = zlib.decompress(base64.b64decode(value["records"]))
        if len(data) != count * dtype.itemsize:
            raise ValueError(f"{len(data)} bytes for {count} records")
        raw = np.frombuffer(data, np.uint8).reshape(dtype.itemsize, count).T.tobytes() if count else b""
        records = np.frombuffer(raw, dtype=dtype).copy()
        started = decode(value["started"]) if value.get("started") is not None else None
        first = value.get("first_started")
        first_started = float(first) if first is not None else None
    except (KeyError, TypeError, zlib.error, binascii.Error) as exc:
        raise ValueError(f"a damaged history line: {exc}") from None
    if started is not None and not isinstance(started, RunStarted):
        raise ValueError("a damaged history line: its run_started is not one")
    return HistoryHead(Buckets(columns, records), started, first_started, offset, inode)
