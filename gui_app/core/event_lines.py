"""Step lines as protocol 3 writes them, and the reader that decodes both forms alike.

A step line is most of ``events.jsonl``: one per step, for weeks on a cluster. Protocol 2 wrote
each replica entry whole -- its full device string, its worker, ``null`` memory on CPUs -- and
every figure with the 17 digits of a double, though TensorFlow computes them in float32: about
860 bytes a step with two replicas and 280 more per replica. Protocol 3 (docs/events.md,
"Versions") writes the same events leaner:

- a replica entry leaves out ``device`` when it is the device ``run_started`` names for that
  replica, ``worker`` when it is 0, and ``memory_bytes`` / ``peak_memory_bytes`` when null;
- the figures of a step and of its replicas are written at float32 precision (the shortest
  decimal that reads back as the same float32): the precision TensorFlow computed them at, far
  finer than the noise of the timings. ``time`` stays at the millisecond the writer rounded it to.

:class:`LineEncoder` is the writer's side (it remembers the devices of the last ``run_started``
it wrote); :class:`LineDecoder` the reader's: it remembers them too and gives a lean entry its
device back, so a file of either form (or one that holds both: a run resumed by a newer version)
decodes to the same :class:`~gui_app.core.events.Step` objects, at float32 precision. A reader
that starts in the middle of a file (``attach --from N``) gets the entries without their device
(``""``): the run history keeps the devices it learnt from the ``run_started``.

Qt-free and TensorFlow-free.
"""
from __future__ import annotations

import json
import math
from typing import Any

import numpy as np

from gui_app.core.event_codec import fields, plain
from gui_app.core.events import Event, ReplicaStats, RunStarted, Step, decode, encode

# The engine's switch for benchmarks (benchmarks/bench_long_runs.py): "full" writes protocol 2's
# long step lines, so the cost of writing either form can be measured on a real run.
LINES_ENV = "REPLICA_STUDIO_EVENT_LINES"
FORMS = ("lean", "full")
_FLOAT32_MAX = float(np.finfo(np.float32).max)


def single(value: float | None) -> float | None:
    """``value`` at float32 precision: the float of its shortest float32 decimal (whose JSON is
    that decimal: ``1.9633662``, not ``1.963366150856018``). None for None and non-finite values."""
    if value is None or not math.isfinite(value):
        return None
    if abs(value) > _FLOAT32_MAX:  # beyond float32's range: as it is
        return float(value)
    return float(str(np.float32(value)))


def _rows(cls: type) -> list[tuple[str, str, bool, Any, str]]:
    """(name, wire, omit, default, kind) of each field but ``time``; kind: ``float`` (a figure),
    ``replicas`` (a step's entries), else ``plain``."""
    rows = []
    for f in fields(cls):
        if f.name == "time":
            continue
        kind = "replicas" if f.part is ReplicaStats else "float" if float in f.as_is else "plain"
        rows.append((f.name, f.wire, f.omit, f.default, kind))
    return rows


_STEP_ROWS = _rows(Step)
# The fields of a replica entry protocol 2 always wrote and protocol 3 leaves out when it can.
_PROTOCOL_2_ENTRY = ("device", "worker", "memory_bytes", "peak_memory_bytes")
_REPLICA_ROWS = _rows(ReplicaStats)


class LineEncoder:
    """Events as the JSON objects of protocol 3: a step lean, every other event as
    :func:`~gui_app.core.events.encode` writes it. One per stream, fed every event in order."""

    def __init__(self, form: str = "lean"):
        if form not in FORMS:
            raise ValueError(f"{LINES_ENV}: must be one of {', '.join(FORMS)}; got {form!r}")
        self.lean = form == "lean"
        self.devices: dict[int, str | None] = {}  # replica -> device, from the last run_started

    def encode(self, event: Event) -> dict[str, Any]:
        if isinstance(event, RunStarted):
            self.devices = {r.replica: r.device for r in event.replicas}
        elif isinstance(event, Step):
            return self.step(event) if self.lean else self._full_step(event)
        return encode(event)

    @staticmethod
    def _full_step(event: Step) -> dict[str, Any]:
        """The step line of protocol 2: every replica entry whole (the fields protocol 3 may
        leave out are written, null or 0 included); fields newer than protocol 2 only when set."""
        out = encode(event)
        for entry, wire in zip(event.replicas, out.get("replicas", [])):
            for name in _PROTOCOL_2_ENTRY:
                wire.setdefault(name, getattr(entry, name))
        return out

    def step(self, event: Step) -> dict[str, Any]:
        out: dict[str, Any] = {"type": event.TYPE, "time": event.time}
        for name, wire, omit, default, kind in _STEP_ROWS:
            value = getattr(event, name)
            if omit and value == default:
                continue
            if kind == "float":
                out[wire] = single(value)
            elif kind == "replicas":
                out[wire] = [self._replica(entry) for entry in value]
            else:
                out[wire] = plain(value)
        return out

    def _replica(self, entry: ReplicaStats) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, wire, omit, default, kind in _REPLICA_ROWS:
            value = getattr(entry, name)
            if name == "device":
                if value == self.devices.get(entry.replica, ""):
                    continue
            elif omit and value == default:
                continue
            out[wire] = single(value) if kind == "float" else value
        return out


class LineDecoder:
    """Decodes the lines of one file or stream in order (:func:`~gui_app.core.events.decode`),
    giving a protocol 3 replica entry the device its run's ``run_started`` named."""

    def __init__(self) -> None:
        self.devices: dict[int, str | None] = {}

    def line(self, line: str | bytes, parts: bool = True) -> Event | None:
        """The event of one JSON line; None for a line that holds none (as ``decode_line``)."""
        try:
            value = json.loads(line)
        except (ValueError, RecursionError):  # not JSON, or nested deeper than any event
            return None
        return self.value(value, parts)

    def value(self, value: Any, parts: bool = True) -> Event | None:
        event = decode(value, parts)
        if event.__class__ is Step:
            if parts and self.devices:
                devices = self.devices
                for entry in event.replicas:
                    if entry.device == "":
                        entry.device = devices.get(entry.replica, "")
        elif event.__class__ is RunStarted:
            self.devices = {r.replica: r.device for r in event.replicas}
        return event
