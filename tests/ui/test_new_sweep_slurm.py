"""The New sweep dialog's trials as Slurm jobs and threshold pruner: what the fields say reaches the
sweep file Start writes (as the engine copied it into the sweep's folder), and a bad value is
refused inline in the sweep file's own words (core/sweep_slurm.py, core/sweep_config.py) with
nothing started."""
from __future__ import annotations

import json

from PySide6.QtCore import Qt

import pytest
from sweep_dirs import logged_commands, type_text

from gui_app.core.config import RunConfig
from gui_app.core.sweep_config import SweepConfig
from gui_app.ui.sweep.new_sweep import NewSweepDialog

CLUSTER = RunConfig.from_dict({"dataset": {"name": "digits"}, "model": {"name": "mlp"},
                               "strategy": {"name": "multi_worker_mirrored", "workers": 1, "devices": []}})


def _dialog(qtbot, fake_engine, tmp_path, base: RunConfig = CLUSTER) -> NewSweepDialog:
    dialog = NewSweepDialog(base, tmp_path / "sweeps", fake_engine)
    qtbot.addWidget(dialog)
    dialog.show()
    return dialog


def _pick_pruner(dialog: NewSweepDialog, key: str) -> None:
    dialog.pruner_box.setCurrentIndex(dialog.pruner_box.findData(key))


def test_slurm_trials_and_the_threshold_pruner_reach_the_sweep_file(qtbot, fake_engine, tmp_path, sweep_log):
    dialog = _dialog(qtbot, fake_engine, tmp_path)
    assert not dialog.partition_edit.isEnabled() and not dialog.threshold_edit.isEnabled()
    assert "slurm" not in dialog.sweep_dict() and dialog.sweep_dict()["hosts"] == ["local"]
    qtbot.mouseClick(dialog.slurm_box, Qt.MouseButton.LeftButton)
    assert dialog.partition_edit.isEnabled() and dialog.slurm_time_edit.isEnabled()
    assert not dialog.places["local"].isEnabled()  # Slurm places the trials
    type_text(qtbot, dialog.partition_edit, "gpu")
    type_text(qtbot, dialog.slurm_time_edit, "2:00:00")
    _pick_pruner(dialog, "threshold")
    assert dialog.threshold_edit.isEnabled()
    type_text(qtbot, dialog.threshold_edit, "0.5")
    assert dialog.error.text() == "" and dialog.start_button.isEnabled()

    with qtbot.waitSignal(dialog.started, timeout=30_000) as started:
        qtbot.mouseClick(dialog.start_button, Qt.MouseButton.LeftButton)
    written = json.loads((tmp_path / "sweeps").joinpath(started.args[0], "sweep.json").read_text())
    assert written["slurm"] == {"partition": "gpu", "time": "2:00:00", "account": None, "cpus_per_task": None,
                                "gpus_per_node": None, "signal_seconds": None, "sbatch": []}
    sweep = SweepConfig.load(f"{started.args[0]}/sweep.json")
    assert (sweep.pruner, sweep.pruner_threshold) == ("threshold", 0.5)
    assert sweep.slurm is not None and (sweep.slurm.partition, sweep.slurm.time) == ("gpu", "2:00:00")
    [command] = logged_commands(sweep_log)
    assert command[0] == "sweep" and "--detach" in command


def test_the_clusters_defaults_are_an_empty_partition_and_time(qtbot, fake_engine, tmp_path):
    dialog = _dialog(qtbot, fake_engine, tmp_path)
    qtbot.mouseClick(dialog.slurm_box, Qt.MouseButton.LeftButton)
    sweep = dialog.check()
    assert sweep is not None and sweep.slurm is not None
    assert (sweep.slurm.partition, sweep.slurm.time) == (None, None) and dialog.start_button.isEnabled()


@pytest.mark.parametrize(("field", "text", "error"), [
    ("slurm_time_edit", "2 hours",
     "slurm.time: must be Slurm's time format (minutes, H:MM:SS or D-HH:MM) or null; got \"2 hours\""),
    ("partition_edit", "gpu big", 'slurm.partition: must be a partition name (no spaces) or null; got "gpu big"'),
])
def test_a_bad_slurm_value_is_refused_inline_and_nothing_starts(qtbot, fake_engine, tmp_path, sweep_log,
                                                                 field, text, error):
    dialog = _dialog(qtbot, fake_engine, tmp_path)
    qtbot.mouseClick(dialog.slurm_box, Qt.MouseButton.LeftButton)
    type_text(qtbot, getattr(dialog, field), text)
    assert dialog.error.text() == error
    assert not dialog.start_button.isEnabled()
    dialog.start()  # (Enter in a field): refused again, nothing runs
    assert dialog._job is None and logged_commands(sweep_log) == []
    type_text(qtbot, getattr(dialog, field), "")  # the cluster's default again
    assert dialog.error.text() == "" and dialog.start_button.isEnabled()


def test_slurm_trials_need_a_cluster_strategy_and_the_threshold_a_number(qtbot, fake_engine, tmp_path, sweep_log):
    dialog = _dialog(qtbot, fake_engine, tmp_path, base=RunConfig.from_dict({"dataset": {"name": "digits"}}))
    qtbot.mouseClick(dialog.slurm_box, Qt.MouseButton.LeftButton)
    assert dialog.error.text().startswith("base.strategy.name: trials as Slurm jobs run multi_worker_mirrored")
    assert not dialog.start_button.isEnabled()
    qtbot.mouseClick(dialog.slurm_box, Qt.MouseButton.LeftButton)  # back to this computer
    assert dialog.error.text() == "" and dialog.start_button.isEnabled()
    _pick_pruner(dialog, "threshold")
    assert dialog.error.text() == ("pruner_threshold: the threshold pruner needs the metric a trial must reach "
                                   "(a number); got null")
    type_text(qtbot, dialog.threshold_edit, "high")
    assert dialog.error.text().endswith('(a number); got "high"') and not dialog.start_button.isEnabled()
    dialog.start()
    assert dialog._job is None and logged_commands(sweep_log) == []
