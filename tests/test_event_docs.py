"""docs/events.md documents every key of every event class (gui_app.core.events) and of every
entry of their lists, so a new key cannot go undocumented."""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from gui_app.core import events as ev
from gui_app.core.event_codec import fields

DOC = (Path(__file__).resolve().parents[1] / "docs" / "events.md").read_text(encoding="utf-8")
CODE = re.compile(r"`([^`]+)`")
PARTS = [(cls, f.wire, f.part) for cls in ev.EVENT_TYPES.values() for f in fields(cls) if f.part is not None]


def _rows(text: str) -> list[list[str]]:
    """The cells of each row of the markdown tables in ``text``."""
    return [[cell.strip() for cell in line.strip().strip("|").split("|")]
            for line in text.splitlines() if line.startswith("|")]


def _keys(cls: type) -> set[str]:
    return {f.wire for f in fields(cls) if f.name != "time"}  # every event has `time`: said once


def _section(heading: str) -> str:
    """The text under a heading of docs/events.md, up to the next heading."""
    section = re.search(rf"^#+ {re.escape(heading)}\n(.*?)(?=^#)", DOC, flags=re.M | re.S)
    assert section, f"docs/events.md has no section {heading}"
    return section.group(1)


def undocumented(cls: type[ev.Event]) -> set[str]:
    """The keys of an event class missing from its row of the events table."""
    rows = [row for row in _rows(_section("Events")) if cls.TYPE in CODE.findall(row[0])]
    assert len(rows) == 1, f"docs/events.md: not one row for `{cls.TYPE}` in the events table"
    return _keys(cls) - set(CODE.findall(rows[0][-1]))


def undocumented_entries(event: type[ev.Event], key: str, part: type) -> set[str]:
    """The keys of a list's entries missing from the first column of its table."""
    rows = _rows(_section(f"`{event.TYPE}.{key}` entries"))
    return _keys(part) - {name for row in rows for name in CODE.findall(row[0])}


@pytest.mark.parametrize("cls", ev.EVENT_TYPES.values(), ids=lambda cls: cls.TYPE)
def test_every_key_of_an_event_is_in_its_row(cls):
    assert undocumented(cls) == set()


@pytest.mark.parametrize("event, key, part", PARTS, ids=[f"{e.TYPE}.{k}" for e, k, _ in PARTS])
def test_every_key_of_a_list_entry_is_in_its_table(event, key, part):
    assert undocumented_entries(event, key, part) == set()


def test_the_lists_are_the_ones_the_classes_have():
    assert set(PARTS) == {(ev.RunStarted, "replicas", ev.ReplicaInfo), (ev.Step, "replicas", ev.ReplicaStats),
                          (ev.Step, "gpus", ev.GpuSample), (ev.Eval, "per_class", ev.ClassMetrics),
                          (ev.Stall, "workers", ev.WorkerStatus)}


def test_a_new_key_is_caught_until_it_is_documented():
    @dataclass(kw_only=True)
    class NewStats(ev.ReplicaStats):
        made_up_figure: float | None = None

    @dataclass(kw_only=True)
    class NewCheckpoint(ev.Checkpoint):
        bytes_written: int = 0

    assert undocumented_entries(ev.Step, "replicas", NewStats) == {"made_up_figure"}
    assert undocumented(NewCheckpoint) == {"bytes_written"}
