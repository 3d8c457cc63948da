"""The schema of the run event protocol: what the engine must write (docs/events.md), derived
from the event classes of gui_app/core/events.py. The engine's tests and the tests' fake engine
are checked against it: every always-written key present with its JSON type, the parts' entries
likewise, and the rules of each type and of a stream's order.

Qt-free and TensorFlow-free.
"""
from __future__ import annotations

from typing import Any

from gui_app.core.event_codec import fields
from gui_app.core.events import ERROR_KINDS, EVENT_TYPES, FINISHED_STATUSES


def required_keys(cls: type) -> dict[str, tuple[type, ...]]:
    """The keys an event (or a part of one) always carries, with their JSON types."""
    return {f.wire: f.json_types for f in fields(cls) if not f.omit}


def _check_keys(where: str, value: dict, keys: dict[str, tuple[type, ...]]) -> list[str]:
    problems = []
    for key, allowed in keys.items():
        if key not in value:
            problems.append(f"{where}: missing {key!r}")
        elif isinstance(value[key], bool) and bool not in allowed:  # JSON true is not a number
            problems.append(f"{where}: {key!r} is a boolean")
        elif not isinstance(value[key], allowed):
            problems.append(f"{where}: {key!r} is {type(value[key]).__name__}")
    return problems


def _part_problems(where: str, items: list, cls: type) -> list[str]:
    problems = []
    for i, entry in enumerate(items):
        if not isinstance(entry, dict):
            problems.append(f"{where}[{i}] is not an object")
        else:
            problems += _check_keys(f"{where}[{i}]", entry, required_keys(cls))
    return problems


def event_problems(event: Any) -> list[str]:
    """What is wrong with one JSON event as the engine wrote it (empty when it follows the
    protocol): every always-written key present with its JSON type (an optional key, when
    written, too), each entry of its parts likewise, and the rules of each type."""
    if not isinstance(event, dict):
        return [f"not a JSON object: {event!r:.60}"]
    kind = event.get("type")
    cls = EVENT_TYPES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        return [f"unknown event type {kind!r}"]
    written = {f.wire: f.json_types for f in fields(cls) if f.omit and f.wire in event}  # optional, when set
    problems = _check_keys(cls.TYPE, event, {"time": (int, float), **required_keys(cls), **written})
    if kind == "error" and event.get("kind") not in ERROR_KINDS:
        problems.append(f"error: kind must be one of {ERROR_KINDS}")
    if kind == "run_finished" and event.get("status") not in FINISHED_STATUSES:
        problems.append(f"run_finished: status must be one of {FINISHED_STATUSES}")
    if kind == "run_finished" and event.get("status") == "failed" and not event.get("message"):
        problems.append("run_finished: a failed run says why in 'message'")
    where = f"step {event.get('step')}" if kind == "step" else kind
    for f in fields(cls):
        if f.part is not None and isinstance(event.get(f.wire), list):  # replicas, gpus, per_class
            problems += _part_problems(f"{where} {f.wire}", event[f.wire], f.part)
    return problems


def stream_problems(events: list[dict]) -> list[str]:
    """Problems of one process's events: each event's, and the order rules (``run_finished`` is
    the last event; steps increase within a process)."""
    problems = [p for event in events for p in event_problems(event)]
    kinds = [e.get("type") for e in events if isinstance(e, dict)]
    if "run_finished" in kinds and kinds.index("run_finished") != len(kinds) - 1:
        problems.append("run_finished is not the last event")
    steps = [e["step"] for e in events if isinstance(e, dict) and e.get("type") == "step" and "step" in e]
    if any(b <= a for a, b in zip(steps, steps[1:])):
        problems.append("step numbers do not increase")
    return problems
