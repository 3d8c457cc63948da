"""RunsPanel: statuses read from run directories the test writes, and what can be done with them."""
from __future__ import annotations

from run_dirs import write_run

from gui_app.ui.window.runs_panel import COLUMNS, RunsPanel

STATUS, NOTE, ACCURACY = COLUMNS.index("Status"), COLUMNS.index("Note"), COLUMNS.index("Test accuracy")


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
    panel = RunsPanel(runs_dir)
    qtbot.addWidget(panel)
    table = rows(panel)
    assert set(table) == {str(done), str(stopped), str(failed), str(died)}
    assert table[str(done)][STATUS] == "completed" and table[str(done)][ACCURACY] == "91.23%"
    assert table[str(stopped)][STATUS] == "stopped (7/20)"
    assert table[str(failed)][STATUS] == "failed"
    assert table[str(failed)][NOTE] == "training: loss is NaN at step 4"
    assert table[str(died)][STATUS] == "interrupted (3/20)"
    assert table[str(done)][COLUMNS.index("Strategy")] == "mirrored ×2 (CPU:0, CPU:1)"
    # newest first
    assert panel.tree.topLevelItem(0).data(0, 256) == str(died)
    panel.set_note(died, "the engine process crashed or was killed")
    assert rows(panel)[str(died)][NOTE] == "the engine process crashed or was killed"


def test_buttons_follow_the_selection(qtbot, runs_dir):
    done = write_run(runs_dir, "a-done", "completed")
    stopped = write_run(runs_dir, "b-stopped", "stopped", started=1.7e9 + 10)
    no_checkpoint = write_run(runs_dir, "c-died", None, started=1.7e9 + 20, checkpoint=False)
    panel = RunsPanel(runs_dir)
    qtbot.addWidget(panel)
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
    panel.set_busy(True)  # a run is active: one at a time
    assert not panel.resume_button.isEnabled() and not panel.open_button.isEnabled()
    panel.set_busy(False)
    with qtbot.waitSignal(panel.resume_requested) as got:
        panel.resume_button.click()
    assert got.args == [str(stopped)]


def test_export_needs_a_trained_model(qtbot, runs_dir):
    trained = write_run(runs_dir, "a-done", "completed")
    (trained / "model.keras").write_bytes(b"")
    stopped = write_run(runs_dir, "b-stopped", "stopped", started=1.7e9 + 10)
    panel = RunsPanel(runs_dir)
    qtbot.addWidget(panel)
    panel.select(stopped)
    assert not panel.export_button.isEnabled()
    panel.select(trained, stopped)
    assert not panel.export_button.isEnabled()
    panel.select(trained)
    panel.set_busy(True)  # exporting a finished run does not disturb the live one
    assert panel.export_button.isEnabled()
    with qtbot.waitSignal(panel.export_requested) as got:
        panel.export_button.click()
    assert got.args == [str(trained)]


def test_the_active_run_shows_as_running(qtbot, runs_dir):
    live = write_run(runs_dir, "live", None)
    panel = RunsPanel(runs_dir)
    qtbot.addWidget(panel)
    panel.set_active_run(live)
    assert rows(panel)[str(live)][STATUS] == "running" and panel.status_of(live) == "running"
    panel.set_active_run(None)
    assert panel.status_of(live) == "interrupted"


def test_a_failed_run_with_a_checkpoint_is_resumable(qtbot, runs_dir):
    """Out of memory or diverged after a checkpoint: resume it (e.g. with a smaller batch)."""
    oom = write_run(runs_dir, "a-oom", "failed", steps=8, message="out of memory with 32 examples per replica")
    (oom / "checkpoints" / "ckpt-8.index").write_bytes(b"")
    refused = write_run(runs_dir, "b-bad-config", "failed", steps=0, message="dataset.path: missing")
    panel = RunsPanel(runs_dir)
    qtbot.addWidget(panel)
    panel.select(oom)
    assert panel.resume_button.isEnabled() and "last good checkpoint" in panel.resume_button.toolTip()
    panel.select(refused)  # failed before any checkpoint: nothing to resume from
    assert not panel.resume_button.isEnabled()
