"""A sweep's trials in the window's run list: their run directories live in the sweep's folder,
not in the runs folder the list scanned, so no trial ever showed there. Real sweep folders
(tests/ui/sweep_dirs.py: the engine's own folder, study and trials.json)."""
from __future__ import annotations

import os
from pathlib import Path

from run_dirs import write_run
from stub_run import StubRun
from sweep_dirs import Trial, write_sweep

from gui_app.core.sweep_runs import trial_runs
from gui_app.ui.window.run_rows import COLUMNS
from gui_app.ui.window.runs_panel import RunsPanel
from gui_app.ui.window.window_state import WindowState

STATUS, NOTE = COLUMNS.index("Status"), COLUMNS.index("Note")
TRIALS = [Trial(0.001, 64, "completed", (0.80, 0.93)), Trial(0.01, 32, "pruned", (0.30,)),
          Trial(0.005, 64, "completed", (0.85, 0.95))]


def test_the_run_list_names_each_trial_after_its_sweep(qtbot, runs_dir):
    sweeps = Path(os.environ["REPLICA_STUDIO_SWEEPS_DIR"])  # the window's sweeps folder (New sweep starts them there)
    sweep = write_sweep(sweeps, TRIALS, name="digits-mlp")
    plain = write_run(runs_dir, "20240101-000000-digits-mnist_cnn", "completed")
    trials = trial_runs(sweeps)
    assert sorted(trials.values()) == ["sweep digits-mlp trial 0", "sweep digits-mlp trial 1",
                                       "sweep digits-mlp trial 2"]
    panel = RunsPanel(WindowState(StubRun(), runs_dir))
    qtbot.addWidget(panel)
    qtbot.waitUntil(lambda: not panel.is_filling())
    tree = panel.tree
    shown = {tree.topLevelItem(i).data(0, 256): [tree.topLevelItem(i).text(c) for c in range(len(COLUMNS))]
             for i in range(tree.topLevelItemCount())}
    assert set(shown) == {str(plain), *(str(p) for p in trials)}
    trial = sweep / "runs" / "trial-0"
    assert shown[str(trial)][NOTE] == "sweep digits-mlp trial 0" and shown[str(trial)][STATUS] == "completed"
    assert shown[str(plain)][NOTE] == ""  # an ordinary run keeps its note
    panel.select(trial)  # a trial is a run like any other: it opens from the list
    assert panel.open_button.isEnabled()


def test_a_run_the_sweep_has_not_recorded_yet_is_listed_as_its_sweeps(tmp_path):
    sweep = write_sweep(tmp_path / "sweeps", TRIALS[:1], name="lr")
    (sweep / "trials.json").write_text("{torn")  # written as the trial starts: not yet whole
    assert list(trial_runs(tmp_path / "sweeps").values()) == ["sweep lr"]
    assert trial_runs(tmp_path / "nowhere") == {}
