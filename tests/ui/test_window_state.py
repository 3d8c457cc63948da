"""WindowState: each part known once, and a signal when it changes (the run's parts driven by a
stand-in for the supervisor, tests/ui/stub_run.py)."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from run_dirs import write_run
from stub_run import StubRun

from gui_app.core.rundir import read_run
from gui_app.core.ssh_hosts import Host
from gui_app.ui.window.window_state import EVALUATION, STATE_TEXT, TABS, ListedRun, WindowState


@pytest.fixture
def run() -> StubRun:
    return StubRun()


@pytest.fixture
def state(run, runs_dir) -> WindowState:
    return WindowState(run, runs_dir)


def test_the_run_state_is_the_supervisors_read_through_with_its_status_line(state, run):
    states, statuses = [], []
    state.run_state_changed.connect(states.append)
    state.status_changed.connect(statuses.append)
    assert state.run_state == "idle" and state.is_idle() and state.status == "Ready"
    run.set_state("starting")
    assert state.run_state == "starting" and not state.is_idle()  # no copy to fall behind
    run.set_state("paused")
    assert states == ["starting", "paused"] and statuses == [STATE_TEXT["starting"], "Paused"]
    state.set_status("Configuration saved")
    state.set_status("Configuration saved")  # unchanged: said once
    assert statuses[-1:] == ["Configuration saved"] and len(statuses) == 3


def test_the_active_run_is_set_by_its_start_and_cleared_before_its_end_is_told(state, run, runs_dir):
    active, ended = [], []
    state.active_run_changed.connect(active.append)
    state.run_ended.connect(lambda *args: ended.append((*args, state.active_run, state.is_idle())))
    run.start(runs_dir / "a")
    assert state.active_run == str(runs_dir / "a") and active == [str(runs_dir / "a")]
    run.end("failed", runs_dir / "a", "out of memory")
    assert active == [str(runs_dir / "a"), ""]
    assert ended == [("failed", str(runs_dir / "a"), "out of memory", None, True)]


def test_a_resumed_run_that_says_no_folder_is_the_run_on_screen(state, run, runs_dir):
    state.set_shown_run(runs_dir / "b")
    run.start("")
    assert state.active_run == str(runs_dir / "b")


def test_the_run_on_screen_and_its_model(state, run, runs_dir):
    shown: list[str] = []
    state.shown_run_changed.connect(shown.append)
    live = runs_dir / "live"
    live.mkdir(parents=True)
    state.set_shown_run(live)
    assert state.shown_run == str(live) and state.model_run() is None and shown == [str(live)]
    state.set_shown_run(live)  # read again: said again
    assert shown == [str(live)] * 2
    (live / "model.keras").write_bytes(b"")
    run.start(live)
    run.end("completed", live)  # the completed run's model.keras is there now
    assert state.model_run() == str(live) and shown == [str(live)] * 3
    run.start(live)
    run.end("completed", live)  # nothing new: not said
    assert len(shown) == 3
    state.set_shown_run(None)
    assert state.shown_run is None and state.model_run() is None and shown[-1] == ""


def test_the_selection_and_what_can_be_resumed(state, run, runs_dir):
    stopped, done = write_run(runs_dir, "a", "stopped"), write_run(runs_dir, "b", "completed")
    listed = [ListedRun(read_run(stopped), resumable=True), ListedRun(read_run(done), resumable=False)]
    changes: list[list] = []
    state.selection_changed.connect(changes.append)
    state.set_selection(listed[:1])
    state.set_selection(listed[:1])  # unchanged: said once
    assert changes == [listed[:1]] and state.resumable_selection() == listed[0]
    assert state.resumable_selection().path == str(stopped)
    run.set_state("running")
    assert state.resumable_selection() is None  # one run at a time
    run.set_state("idle")
    state.set_selection(listed)
    assert state.resumable_selection() is None and len(changes) == 2  # two runs: which one?
    state.set_selection(listed[1:])
    assert state.resumable_selection() is None  # nothing to resume from


def test_forms_validity_and_the_tab(state):
    valid, tabs = [], []
    state.forms_valid_changed.connect(valid.append)
    state.tab_changed.connect(tabs.append)
    state.set_forms_valid(True)
    state.set_forms_valid(True)
    state.set_forms_valid(False)
    assert valid == [True, False] and not state.forms_valid
    assert state.tab == TABS[0]
    state.set_tab(EVALUATION)
    state.set_tab(EVALUATION)
    assert tabs == [EVALUATION] and state.tab == "Evaluation"
    with pytest.raises(ValueError, match="no tab 'Charts'; tabs: Dataset, Training"):
        state.set_tab("Charts")
    assert Path(state.runs_dir).name == "runs"


def test_a_run_stopped_before_its_end_exports_its_last_checkpoint(state, run, runs_dir):
    stopped = write_run(runs_dir, "a", "stopped")
    state.set_shown_run(stopped)
    assert state.export_run() is None  # a checkpoints folder without a checkpoint in it
    (stopped / "checkpoints" / "ckpt-1.index").write_bytes(b"")
    assert state.export_run() == str(stopped)
    assert state.model_run() is None  # the Try tab needs the trained model
    run.start(stopped)  # resumed: its checkpoints are being written
    assert state.export_run() is None


def test_export_takes_the_one_run_selected_else_the_run_on_screen_and_says_why_not(state, run, runs_dir):
    shown, selected = write_run(runs_dir, "shown", "completed"), write_run(runs_dir, "picked", "completed")
    (shown / "model.keras").write_bytes(b"")
    state.set_shown_run(shown)
    assert state.export_choice() == (str(shown), "")
    state.set_selection([ListedRun(read_run(selected), resumable=False)])
    assert state.export_choice() == (None, "picked has no trained model or checkpoint to export")
    (selected / "model.keras").write_bytes(b"")  # its folder is looked at, not the list's older read
    assert state.export_choice() == (str(selected), "")
    two = [ListedRun(read_run(selected), resumable=False), ListedRun(read_run(shown), resumable=False)]
    state.set_selection(two)
    assert state.export_choice() == (str(shown), "")  # two selected: the run on screen
    live = write_run(runs_dir, "live", None)
    (live / "checkpoints" / "ckpt-1.index").write_bytes(b"")
    run.start(live)
    state.set_selection([ListedRun(read_run(live), resumable=True)])
    assert state.export_choice() == (None, "live is training: its model can be exported once it has ended")
    there = read_run(selected)
    on_host = replace(there, path=Path(f"gpu1:{there.path}"), has_model=True)  # as `runs --json` there says
    state.set_selection([ListedRun(on_host, resumable=False)])
    assert state.export_choice() == (f"gpu1:{there.path}", "")
    state.set_selection([ListedRun(replace(on_host, has_model=False), resumable=True)])
    assert state.export_choice() == (None, "picked on gpu1 has no trained model or checkpoint to export")
    state.set_selection([])
    state.set_shown_run(None)
    assert state.export_choice() == (None, "Select a run with a trained model in the run list (or open one) first")


def test_run_on_is_a_field_whose_signal_says_each_change_once(state):
    told: list[object] = []
    state.run_on_changed.connect(told.append)
    assert state.run_on is None  # this computer
    state.set_run_on(Host("gpu1"))
    state.set_run_on(Host("gpu1"))  # the same entry: nothing to say
    state.set_run_on(None)
    assert told == [Host("gpu1"), None] and state.run_on is None
