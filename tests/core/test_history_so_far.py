"""The history a window shows before it attaches (rundir.read_history_so_far): the complete lines
of events.jsonl, how many they are (``attach --from`` goes on there), and whether the run is paused."""
from __future__ import annotations

import json

from gui_app.core import events as ev
from gui_app.core.rundir import EVENTS_FILE, read_history_so_far


def _line(event: ev.Event) -> str:
    return json.dumps(ev.encode(event)) + "\n"


def test_only_complete_lines_are_read_and_counted(tmp_path):
    lines = [_line(ev.RunStarted(time=1.0, run_dir=str(tmp_path), config={}, total_steps=10)),
             *(_line(ev.Step(time=1.0 + s, step=s, epoch=1, loss=1.0 / s)) for s in (1, 2, 3)),
             _line(ev.Paused(time=5.0, step=3))]
    (tmp_path / EVENTS_FILE).write_text("".join(lines) + _line(ev.Continued(time=6.0, step=3))[:20])  # torn
    so_far = read_history_so_far(tmp_path)
    assert so_far.lines == 5 and so_far.paused  # the torn continue is not read yet: attach --from 5 sends it
    assert [int(s) for s in so_far.history.training.steps.column(0)] == [1, 2, 3]
    assert so_far.history.started is not None and so_far.history.started.total_steps == 10
    with (tmp_path / EVENTS_FILE).open("a") as f:
        f.write(_line(ev.Continued(time=6.0, step=3))[20:])
    again = read_history_so_far(tmp_path)
    assert (again.lines, again.paused) == (6, False)
    assert again.inode == (tmp_path / EVENTS_FILE).stat().st_ino  # the file read (attach --inode)


def test_a_run_without_events_has_none(tmp_path):
    so_far = read_history_so_far(tmp_path)
    assert so_far.lines == 0 and so_far.history.started is None and not so_far.paused
