"""Opening a big run never freezes the window: its events are read on a thread (a small run's at
once, as before) and the latest Open is shown (gui_app/ui/window/file_actions.py)."""
from __future__ import annotations

import time

from gui_gaps import slowed
from run_dirs import wait_listed, write_run
from windows import shown_window

from gui_app.ui.window import file_actions
from gui_app.ui.window.file_actions import READ_HERE_BYTES
from gui_app.ui.window.window_state import TRAINING


def test_a_big_run_is_read_off_the_gui_thread_and_the_latest_open_is_shown(qtbot, fake_engine, runs_dir,
                                                                            monkeypatch):
    first = write_run(runs_dir, "20261201-090000-digits", "completed", steps=1000)
    second = write_run(runs_dir, "20261201-100000-digits", "stopped", steps=900)
    assert (first / "events.jsonl").stat().st_size > READ_HERE_BYTES
    small = write_run(runs_dir, "20261201-110000-digits", "completed", steps=10)
    on_gui = slowed(monkeypatch, file_actions, "read_history", 0.5)
    with shown_window(qtbot, engine_command=fake_engine) as window:
        wait_listed(qtbot, window.runs)
        started = time.monotonic()
        assert window.files.open_run(str(first)) and window.files.open_run(str(second))
        assert time.monotonic() - started < 0.4  # neither was read here
        assert window.files.is_reading()
        assert window.state_label.text() == f"Reading {second.name}…"
        qtbot.waitUntil(lambda: not window.files.is_reading(), timeout=10_000)
        assert window.state_label.text() == "Ready"  # the line gave way once the run was shown
        assert window.state.shown_run == str(second)  # the latest Open, not the one read last
        assert window.shown.history.status.step == 900 and window.state.tab == TRAINING
        assert on_gui == [False, False]
        assert window.files.open_run(str(small)) and not window.files.is_reading()  # small: shown at once
        assert window.state.shown_run == str(small) and on_gui[-1] is True
