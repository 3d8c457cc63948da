"""RunsPanel: statuses read from run directories the test writes, and what can be done with them."""
from __future__ import annotations

import shutil
import time

from PySide6.QtCore import Qt, QTimer

from gui_gaps import gui_thread_gaps
from run_dirs import listed_status, write_run
from stub_run import StubRun

from gui_app.ui.window.run_reader import BATCH_RUNS
from gui_app.ui.window.run_rows import COLUMNS
from gui_app.ui.window.runs_panel import RunsPanel
from gui_app.ui.window.window_state import WindowState

STATUS, NOTE, ACCURACY = COLUMNS.index("Status"), COLUMNS.index("Note"), COLUMNS.index("Test accuracy")


def listed(qtbot, runs_dir, run: StubRun | None = None) -> RunsPanel:
    """A panel over ``runs_dir`` once its first fill (on the reader's thread) has ended; ``run``
    stands in for the window's run supervisor."""
    panel = RunsPanel(WindowState(run or StubRun(), runs_dir))
    qtbot.addWidget(panel)
    qtbot.waitUntil(lambda: not panel.is_filling())
    return panel


def rows(panel: RunsPanel) -> dict[str, list[str]]:
    tree = panel.tree
    return {tree.topLevelItem(i).data(0, 256): [tree.topLevelItem(i).text(c) for c in range(len(COLUMNS))]
            for i in range(tree.topLevelItemCount())}


def test_statuses_and_notes(qtbot, runs_dir):
    done = write_run(runs_dir, "a-done", "completed", started=1.7e9, accuracy=0.9123)
    stopped = write_run(runs_dir, "b-stopped", "stopped", steps=7, started=1.7e9 + 10)
    failed = write_run(runs_dir, "c-failed", "failed", started=1.7e9 + 20, message="training: loss is NaN at step 4")
    died = write_run(runs_dir, "d-died", None, steps=3, started=1.7e9 + 30)
    (runs_dir / "not-a-run").mkdir()
    run = StubRun()
    panel = listed(qtbot, runs_dir, run)
    table = rows(panel)
    assert set(table) == {str(done), str(stopped), str(failed), str(died)}
    assert table[str(done)][STATUS] == "completed" and table[str(done)][ACCURACY] == "91.23%"
    assert table[str(stopped)][STATUS] == "stopped (7/20)"
    assert table[str(failed)][STATUS] == "failed"
    assert table[str(failed)][NOTE] == "training: loss is NaN at step 4"
    assert table[str(died)][STATUS] == "interrupted (3/20)"
    assert table[str(done)][COLUMNS.index("Strategy")] == "mirrored, 2 replicas (CPU:0, CPU:1)"
    # newest first
    assert panel.tree.topLevelItem(0).data(0, 256) == str(died)
    run.end("interrupted", died, "the engine process crashed or was killed")  # shown at once, before the refresh
    assert rows(panel)[str(died)][NOTE] == "the engine process crashed or was killed"
    assert panel.selected_paths() == [str(died)]  # the run that ended is selected


def test_buttons_follow_the_selection(qtbot, runs_dir):
    done = write_run(runs_dir, "a-done", "completed")
    stopped = write_run(runs_dir, "b-stopped", "stopped", started=1.7e9 + 10)
    no_checkpoint = write_run(runs_dir, "c-died", None, started=1.7e9 + 20, checkpoint=False)
    run = StubRun()
    panel = listed(qtbot, runs_dir, run)
    panel.select(stopped)
    assert panel.open_button.isEnabled() and panel.resume_button.isEnabled()
    assert not panel.overlay_button.isEnabled()
    panel.select(done)
    assert not panel.resume_button.isEnabled()
    panel.select(no_checkpoint)
    assert not panel.resume_button.isEnabled()  # nothing to resume from
    panel.select(done, stopped)
    assert panel.overlay_button.isEnabled() and not panel.open_button.isEnabled()
    with qtbot.waitSignal(panel.overlay_requested) as got:
        panel.overlay_button.click()
    assert set(got.args) == {str(done), str(stopped)}
    panel.select(stopped)
    run.set_state("running")  # a run is active: one at a time
    assert not panel.resume_button.isEnabled() and not panel.open_button.isEnabled()
    run.set_state("idle")
    with qtbot.waitSignal(panel.resume_requested) as got:
        panel.resume_button.click()
    assert got.args == [str(stopped)]


def test_export_needs_a_trained_model_or_a_checkpoint(qtbot, runs_dir):
    trained = write_run(runs_dir, "a-done", "completed")
    (trained / "model.keras").write_bytes(b"")
    stopped = write_run(runs_dir, "b-stopped", "stopped", started=1.7e9 + 10)
    run = StubRun()
    panel = listed(qtbot, runs_dir, run)
    panel.select(stopped)
    assert not panel.export_button.isEnabled()  # an empty checkpoints folder
    (stopped / "checkpoints" / "ckpt-5.index").write_bytes(b"")
    panel.select(trained)
    panel.select(stopped)
    assert panel.export_button.isEnabled()  # stopped early: its last checkpoint is exported
    panel.select(trained, stopped)
    assert not panel.export_button.isEnabled()
    panel.select(trained)
    run.set_state("running")  # exporting a finished run does not disturb the live one
    assert panel.export_button.isEnabled()
    with qtbot.waitSignal(panel.export_requested) as got:
        panel.export_button.click()
    assert got.args == [str(trained)]


def test_the_active_run_shows_as_running(qtbot, runs_dir):
    live = write_run(runs_dir, "live", None)
    run = StubRun()
    panel = listed(qtbot, runs_dir, run)
    run.start(live)
    assert rows(panel)[str(live)][STATUS] == "running" and listed_status(panel, live) == "running"
    run.end("stopped", live)
    assert listed_status(panel, live) == "interrupted"


def test_a_failed_run_with_a_checkpoint_is_resumable(qtbot, runs_dir):
    """Out of memory or diverged after a checkpoint: resume it (e.g. with a smaller batch)."""
    oom = write_run(runs_dir, "a-oom", "failed", steps=8, message="out of memory with 32 examples per replica")
    (oom / "checkpoints" / "ckpt-8.index").write_bytes(b"")
    refused = write_run(runs_dir, "b-bad-config", "failed", steps=0, message="dataset.path: missing")
    panel = listed(qtbot, runs_dir)
    panel.select(oom)
    assert panel.resume_button.isEnabled() and "last good checkpoint" in panel.resume_button.toolTip()
    panel.select(refused)  # failed before any checkpoint: nothing to resume from
    assert not panel.resume_button.isEnabled()


def cold_runs(runs_dir, count: int, steps: int) -> list:
    """``count`` runs of ``steps`` step events each and no summary.json: every events.jsonl
    must be read in full (a folder from an older version, or copied in)."""
    first = write_run(runs_dir, "00000", "completed", steps=steps, accuracy=0.5)
    events, config = (first / "events.jsonl").read_bytes(), (first / "config.json").read_bytes()
    runs = [first]
    for i in range(1, count):
        run = runs_dir / f"{i:05d}"
        run.mkdir()
        (run / "config.json").write_bytes(config)
        # Distinct start times (the sort key): the run_started "time" is the first number in the file.
        (run / "events.jsonl").write_bytes(events.replace(b'"time": 1700000000.0', f'"time": {1.7e9 + i}'.encode(), 1))
        runs.append(run)
    return runs


def test_a_cold_folder_fills_without_blocking_the_event_loop(qtbot, runs_dir, monkeypatch):
    """200 runs without summaries (about 0.4 MB of events each): the panel is built, and its rows
    arrive in slices, while a 10 ms timer keeps firing. Judged on the fill's own work on the GUI
    thread -- each slice's rows and time -- and on the probe's median, not on its longest gap: a
    garbage collection freeing what earlier tests left (pyqtgraph's plot menus of their windows,
    about 40,000 objects, 0.9-1.6 s; gc_guard.py) may land in the fill, and is not the fill's."""
    runs = cold_runs(runs_dir, 200, steps=600)
    slices = []
    place_rows = RunsPanel._on_batch

    def timed(panel, rows):
        started = time.perf_counter()
        place_rows(panel, rows)
        slices.append((len(rows), time.perf_counter() - started))

    monkeypatch.setattr(RunsPanel, "_on_batch", timed)
    made: list[RunsPanel] = []
    with gui_thread_gaps(10) as gaps:  # the probe
        state = WindowState(StubRun(), runs_dir)
        QTimer.singleShot(0, lambda: made.append(RunsPanel(state)))  # built inside the running event loop
        qtbot.waitUntil(lambda: bool(made) and not made[0].is_filling(), timeout=60_000)
    panel = made[0]
    qtbot.addWidget(panel)
    gaps.sort()
    longest_slice = max(seconds for _, seconds in slices)
    print(f"fill: {len(gaps)} probe ticks, median {gaps[len(gaps) // 2] * 1000:.0f} ms, longest "
          f"{gaps[-1] * 1000:.0f} ms; {len(slices)} slices, the longest {longest_slice * 1000:.0f} ms")
    assert len(gaps) > 20  # the fill took a while: long enough for the probe to mean something
    assert len(slices) > 1 and sum(n for n, _ in slices) == 200  # the rows came in slices, not in one go
    assert max(n for n, _ in slices) <= BATCH_RUNS
    assert longest_slice < 0.15, f"placing one slice of rows held the event loop for {longest_slice * 1000:.0f} ms"
    assert gaps[len(gaps) // 2] < 0.05, "the event loop was held up through the fill"
    order = [panel.tree.topLevelItem(i).data(0, 256) for i in range(panel.tree.topLevelItemCount())]
    assert order == [str(r) for r in reversed(runs)]  # every run, newest first, once
    assert all((r / "summary.json").is_file() for r in runs)  # the next start reads warm


def test_a_refresh_during_a_fill_replaces_it(qtbot, runs_dir):
    """Refreshes while a fill runs: the rows end as the folder is, each once, the selection
    kept, and a run deleted in between is gone."""
    runs = cold_runs(runs_dir, 60, steps=100)
    panel = listed(qtbot, runs_dir)
    panel.select(runs[5])
    shutil.rmtree(runs[7])
    extra = write_run(runs_dir, "zz-new", "stopped", started=1.8e9)
    with qtbot.waitSignal(panel.filled, timeout=30_000):
        for _ in range(5):
            panel.refresh()
    qtbot.waitUntil(lambda: not panel.is_filling())
    table = rows(panel)
    assert len(table) == panel.tree.topLevelItemCount() == 60
    assert str(runs[7]) not in table and table[str(extra)][STATUS] == "stopped (10/20)"
    assert panel.tree.topLevelItem(0).data(0, 256) == str(extra)  # newest first, placed as it arrived
    assert panel.selected_paths() == [str(runs[5])]


def test_a_selection_asked_before_the_row_arrives_is_applied(qtbot, runs_dir):
    """The window selects a run that just finished: its row may not be listed yet."""
    panel = listed(qtbot, runs_dir)
    run = write_run(runs_dir, "later", "completed")
    panel.refresh()
    panel.select(run)
    qtbot.waitUntil(lambda: not panel.is_filling())
    assert panel.selected_paths() == [str(run)] and panel.open_button.isEnabled()


def test_sorting_by_a_column_keeps_the_selection(qtbot, runs_dir):
    low = write_run(runs_dir, "a", "completed", accuracy=0.095, started=1.7e9 + 30)
    high = write_run(runs_dir, "b", "completed", accuracy=0.9, started=1.7e9)
    full = write_run(runs_dir, "c", "completed", accuracy=1.0, started=1.7e9 + 10)
    panel = listed(qtbot, runs_dir)
    panel.select(high)
    panel.tree.header().setSortIndicator(ACCURACY, Qt.SortOrder.DescendingOrder)
    order = [panel.tree.topLevelItem(i).data(0, 256) for i in range(3)]
    assert order == [str(full), str(high), str(low)]  # by value: "100.00%" is not below "9.50%"
    assert panel.selected_paths() == [str(high)]
    new = write_run(runs_dir, "d", "completed", accuracy=0.5, started=1.9e9)
    panel.refresh()
    qtbot.waitUntil(lambda: not panel.is_filling())
    order = [panel.tree.topLevelItem(i).data(0, 256) for i in range(4)]
    assert order == [str(full), str(high), str(new), str(low)]  # a new row goes where the sort puts it
