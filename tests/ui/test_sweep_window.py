"""Sweeps in the window: the New sweep dialog builds the sweep file from the fields and refuses bad
rows inline; the sweep view fills its table and charts from the real ``sweep status --json`` over a
real sweep folder (tests/ui/sweep_dirs.py) and its buttons reach the main window."""
from __future__ import annotations

import math

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QLabel

import pytest
from sweep_dirs import Trial, logged_commands, type_text, write_sweep

from gui_app.core.config import RunConfig
from gui_app.core.sweep_config import SweepConfig
from gui_app.ui.dialogs.compare import CompareDialog
from gui_app.ui.sweep.new_sweep import DEFAULT_EPOCHS, NewSweepDialog
from gui_app.ui.sweep.parameter_table import CHOICES, HIGH, KEY, KIND, LOW
from gui_app.ui.sweep.view import SweepView

TRIALS = [Trial(0.001, 64, "completed", (0.80, 0.90, 0.93)),
          Trial(0.0001, 32, "pruned", (0.30,)),
          Trial(0.01, 128, "completed", (0.85, 0.95, 0.97)),
          Trial(0.05, 64, "completed", (0.60, 0.70, 0.75))]


@pytest.fixture
def dialog(qtbot, fake_engine, tmp_path):
    dialog = NewSweepDialog(RunConfig.from_dict({"dataset": {"name": "digits"}, "model": {"name": "mlp"}}),
                            tmp_path / "sweeps", fake_engine)
    qtbot.addWidget(dialog)
    dialog.show()
    return dialog


def test_new_sweep_builds_the_sweep_file_from_the_fields(qtbot, dialog, sweep_log, tmp_path):
    rows = dialog.rows
    assert rows.keys() == ["training.learning_rate"]  # the first row: a log range of the rate
    assert rows.widget(0, KIND).currentData() == "log_uniform"
    type_text(qtbot, rows.widget(0, LOW), "0.0005")
    qtbot.mouseClick(rows.add_button, Qt.MouseButton.LeftButton)
    assert rows.keys() == ["training.learning_rate", "training.global_batch_size"]
    type_text(qtbot, rows.widget(1, CHOICES), "16, 32")
    qtbot.mouseClick(rows.add_button, Qt.MouseButton.LeftButton)
    rows.widget(2, KEY).setCurrentIndex(rows.widget(2, KEY).findData("training.epochs"))
    assert rows.widget(2, KIND).currentData() == "int" and rows.widget(2, LOW).isEnabled()
    type_text(qtbot, rows.widget(2, HIGH), "4")
    dialog.method_box.setFocus()
    qtbot.keyClicks(dialog.method_box, "R")  # Random
    qtbot.keyClicks(dialog.metric_box, "Validation l")  # Validation loss: lower is better
    assert dialog.direction_box.currentData() == "minimize"
    type_text(qtbot, dialog.trials_box.lineEdit(), "5")
    type_text(qtbot, dialog.parallel_box.lineEdit(), "2")
    assert dialog.error.text() == "" and dialog.start_button.isEnabled()

    with qtbot.waitSignal(dialog.started, timeout=30_000) as started:
        qtbot.mouseClick(dialog.start_button, Qt.MouseButton.LeftButton)
    sweep = SweepConfig.load(f"{started.args[0]}/sweep.json")  # as the engine copied it into the folder
    assert {p.key: (p.kind, p.values) for p in sweep.parameters} == {
        "training.learning_rate": ("log_uniform", (0.0005, 0.1)),
        "training.global_batch_size": ("choice", (16, 32)),
        "training.epochs": ("int", (2, 4))}
    assert (sweep.method, sweep.metric, sweep.direction, sweep.trials, sweep.parallel, sweep.pruner) == (
        "random", "val_loss", "minimize", 5, 2, "none")
    assert sweep.base.dataset.name == "digits" and sweep.base.model.name == "mlp"
    [command] = logged_commands(sweep_log)
    assert command[0] == "sweep" and command[2:] == ["--detach", "--sweeps-dir", str(tmp_path / "sweeps")]


def test_new_sweep_says_what_a_trial_trains_and_does_not_take_the_forms_300_epochs(qtbot, fake_engine, tmp_path):
    """A form left at 300 epochs started 4 trials of 6,000 steps each; the dialog said only
    "(digits, mnist_cnn)"."""
    base = RunConfig.from_dict({"dataset": {"name": "digits"}, "model": {"name": "mnist_cnn"},
                                "training": {"epochs": 300, "global_batch_size": 64}})
    dialog = NewSweepDialog(base, tmp_path / "sweeps", fake_engine, train_examples=1294)
    qtbot.addWidget(dialog)
    dialog.show()
    assert dialog.epochs_box.value() == DEFAULT_EPOCHS == 10
    type_text(qtbot, dialog.trials_box.lineEdit(), "4")
    assert dialog.cost.text() == ("20 steps per epoch (1,294 examples / 64) × 10 epochs (the forms say 300) = "
                                  "200 steps per trial; 4 trials: 800 steps in all.")
    type_text(qtbot, dialog.epochs_box.lineEdit(), "3")  # the trial's epochs are the dialog's to set
    assert dialog.cost.text().endswith("= 60 steps per trial; 4 trials: 240 steps in all.")
    assert dialog.check().base.training.epochs == 3  # the sweep file's base trains 3 epochs
    assert "global batch 64" in dialog.findChild(QLabel).text()
    dialog.rows.add_row()
    dialog.rows.widget(1, KEY).setCurrentIndex(dialog.rows.widget(1, KEY).findData("training.epochs"))
    assert dialog.cost.text() == "The epochs vary from trial to trial (a row above)."
    unknown = NewSweepDialog(base.replace(training={"epochs": 4}), tmp_path / "sweeps", fake_engine)
    qtbot.addWidget(unknown)  # the dataset not checked yet: the epochs, and that the steps come later
    assert unknown.epochs_box.value() == 4
    assert unknown.cost.text() == "4 epochs per trial × 8 trials; the steps show once the dataset is checked."


def test_the_windows_new_sweep_knows_the_training_set_from_the_forms_check(qtbot, window):
    with qtbot.waitSignal(window.config_panel.inspected, timeout=10_000):
        window.config_panel.inspector.retry()
    dialog = window.sweeps.new_sweep()
    assert "(1,000 examples / 64)" in dialog.cost.text()  # the fake engine's digits: 1,000 training examples
    dialog.reject()


@pytest.mark.parametrize(("column", "text", "error"), [
    (HIGH, "0.0001", "parameters.training.learning_rate.log_uniform: empty range: low must be below high"),
    (LOW, "0", "parameters.training.learning_rate.log_uniform: a log range must lie above 0"),
    (LOW, "fast", "parameters.training.learning_rate.log_uniform: must be [low, high]; got [\"fast\", 0.1]"),
])
def test_a_bad_range_is_refused_inline_and_nothing_starts(qtbot, dialog, sweep_log, column, text, error):
    type_text(qtbot, dialog.rows.widget(0, column), text)
    assert dialog.error.text().startswith(error), dialog.error.text()
    assert not dialog.start_button.isEnabled()
    dialog.start()  # (Enter in a field): refused again, nothing runs
    assert dialog._job is None and logged_commands(sweep_log) == []


def test_an_unknown_choice_is_refused_with_the_configs_own_words(qtbot, dialog, sweep_log):
    rows = dialog.rows
    rows.widget(0, KEY).setCurrentIndex(rows.widget(0, KEY).findData("training.optimizer"))
    assert rows.widget(0, KIND).currentData() == "choice" and not rows.widget(0, LOW).isEnabled()
    type_text(qtbot, rows.widget(0, CHOICES), "adam, adamx")
    assert dialog.error.text().startswith('parameters.training.optimizer.choice: "adamx" is refused: '
                                          "training.optimizer: must be one of"), dialog.error.text()
    assert not dialog.start_button.isEnabled()
    type_text(qtbot, rows.widget(0, CHOICES), "adam, sgd")
    assert dialog.error.text() == "" and dialog.start_button.isEnabled()
    assert logged_commands(sweep_log) == []


def _open_view(qtbot, fake_engine, sweep_dir) -> SweepView:
    view = SweepView(str(sweep_dir), fake_engine)
    qtbot.addWidget(view)
    view.show()
    qtbot.waitUntil(lambda: view.status is not None, timeout=30_000)
    qtbot.waitUntil(lambda: len(view.reader.curves) == len(TRIALS), timeout=10_000)  # read off the GUI thread
    return view


def test_the_sweep_view_fills_its_table_and_charts(qtbot, fake_engine, tmp_path):
    view = _open_view(qtbot, fake_engine, write_sweep(tmp_path / "sweeps", TRIALS))
    view.charts.flush()
    table = view.table
    assert table.rowCount() == 4
    headers = [table.horizontalHeaderItem(c).text() for c in range(table.columnCount())]
    assert headers == ["Trial", "State", "Learning rate", "Global batch", "Validation accuracy", "Epochs",
                       "Duration", "Runs on"]
    assert [table.item(r, 1).text() for r in range(4)] == ["completed", "pruned", "completed", "completed"]
    assert [table.item(r, 4).text() for r in range(4)] == ["0.9300", "0.3000", "0.9700", "0.7500"]
    assert [table.item(r, 2).text() for r in range(4)] == ["0.001", "0.0001", "0.01", "0.05"]
    assert table.item(2, 0).font().bold() and not table.item(0, 0).font().bold()  # the best trial
    assert "best: trial 2" in view.header.text()

    charts = view.charts
    x, y = charts.best_points.getData()
    assert list(x) == [0, 2, 3] and list(y) == pytest.approx([0.93, 0.97, 0.75])
    assert list(charts.best_line.getData()[1]) == pytest.approx([0.93, 0.97, 0.97])
    # A line per trial with a metric, over the rate (log), the batch (its choice) and the metric.
    assert len(charts.coordinate_lines) == 4
    first = charts.coordinate_lines[0].getData()[1]
    assert list(first) == pytest.approx([1 / 3, 0.5, (0.93 - 0.3) / (0.97 - 0.3)])  # 1e-3 in [1e-4, 1e-1]
    widths = charts.importance_bars.opts["width"]
    assert len(widths) == 2 and sum(widths) == pytest.approx(1.0)
    # Every trial's validation curve; the best one highlighted (drawn last, wider).
    assert len(charts.trial_curves) == 4
    best = charts.trial_curves[-1]
    assert list(best.getData()[1]) == pytest.approx([0.85, 0.95, 0.97]) and best.opts["pen"].width() == 2
    assert all(not math.isnan(v) for c in charts.trial_curves for v in c.getData()[1])


def test_a_sweep_without_two_completed_trials_shows_no_importance(qtbot, fake_engine, tmp_path):
    view = SweepView(str(write_sweep(tmp_path / "sweeps", TRIALS[:2])), fake_engine)
    qtbot.addWidget(view)
    qtbot.waitUntil(lambda: view.status is not None, timeout=30_000)
    view.charts.flush()
    assert view.status.importance == {} and view.charts.importance_bars is None
    assert view.charts.note.textItem.toPlainText() == "Importance needs two completed trials"


def test_the_views_buttons_reach_the_main_window(qtbot, make_window, tmp_path, sweep_log):
    window = make_window()
    sweep_dir = write_sweep(tmp_path / "sweeps", TRIALS)
    with qtbot.waitSignal(window.sweeps.view_opened) as opened:
        window.sweeps.open_sweep(str(sweep_dir))
    view = opened.args[0]
    qtbot.waitUntil(lambda: view.status is not None, timeout=30_000)
    assert view.train_button.isEnabled() and not view.open_button.isEnabled()

    qtbot.mouseClick(view.train_button, Qt.MouseButton.LeftButton)  # the best trial: rate 0.01, batch 128
    config = window.config_panel.config()
    assert (config.training.learning_rate, config.training.global_batch_size) == (0.01, 128)
    assert (config.dataset.name, config.model.name) == ("digits", "mlp")
    assert "press Train" in window.state.status

    view.table.selectRow(2)
    qtbot.mouseClick(view.open_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: window.state.shown_run.endswith("trial-2"), timeout=10_000)

    assert view.compare_button.isEnabled()
    qtbot.mouseClick(view.compare_button, Qt.MouseButton.LeftButton)
    [compare] = [w for w in QApplication.topLevelWidgets() if isinstance(w, CompareDialog) and w.isVisible()]
    qtbot.waitUntil(lambda: compare.figures is not None and len(compare.figures) == 4, timeout=30_000)
    compare.close()

    qtbot.mouseClick(view.export_button, Qt.MouseButton.LeftButton)
    assert window.models.export_dialog.windowTitle() == "Export trial-2"
    window.models.export_dialog.reject()

    # 4 of 6 trials: the sweep's process is gone with budget left, so it can be resumed, not stopped.
    assert view.resume_button.isEnabled() and not view.stop_button.isEnabled()
    qtbot.mouseClick(view.resume_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: ["sweep", "resume", str(sweep_dir), "--detach"] in logged_commands(sweep_log),
                    timeout=30_000)
    qtbot.waitUntil(lambda: view.message.text() == "The sweep runs again.", timeout=30_000)
    view.close()


def test_new_sweep_runs_trials_on_the_hosts_ticked(qtbot, fake_engine, tmp_path, isolated_dirs):
    from gui_app.core.ssh_hosts import Host, add_host

    add_host(Host("gpu1"), isolated_dirs[0] / "hosts.json")
    add_host(Host("me@gpu2", port=2222), isolated_dirs[0] / "hosts.json")
    dialog = NewSweepDialog(RunConfig(), tmp_path / "sweeps", fake_engine)
    qtbot.addWidget(dialog)
    dialog.show()
    assert list(dialog.places) == ["local", "gpu1", "me@gpu2"]  # this computer, then Tools -> Hosts' list
    assert dialog.sweep_dict()["hosts"] == ["local"]  # by default: this computer only
    qtbot.mouseClick(dialog.places["me@gpu2"], Qt.MouseButton.LeftButton)
    assert dialog.sweep_dict()["hosts"] == ["local", "me@gpu2"] and dialog.start_button.isEnabled()
    qtbot.mouseClick(dialog.places["local"], Qt.MouseButton.LeftButton)
    qtbot.mouseClick(dialog.places["me@gpu2"], Qt.MouseButton.LeftButton)
    assert dialog.error.text().startswith("hosts: must be a non-empty list") and not dialog.start_button.isEnabled()


def test_a_trial_on_an_ssh_host_opens_from_there(qtbot, fake_engine, tmp_path):
    trials = [*TRIALS[:3], Trial(0.05, 64, "completed", (0.60, 0.70, 0.99), host="gpu1")]
    view = SweepView(str(write_sweep(tmp_path / "sweeps", trials)), fake_engine)
    qtbot.addWidget(view)
    view.show()
    qtbot.waitUntil(lambda: view.status is not None, timeout=30_000)
    assert [view.table.item(r, 7).text() for r in range(4)] == ["this machine"] * 3 + ["gpu1"]
    there = view.status.trials[3]
    assert view.best().number == 3
    assert view.run_dirs() == [t.run_dir for t in view.status.trials[:3]]  # compared and drawn from here
    with qtbot.waitSignal(view.export_run) as exported:
        view.export_best()
    assert exported.args == [f"gpu1:{there.run_dir}"]  # the window exports it from the host
    view.table.selectRow(3)
    with qtbot.waitSignal(view.open_run) as opened:
        view.open_selected()
    assert opened.args == [f"gpu1:{there.run_dir}"]


def test_a_trial_run_as_a_slurm_job_shows_its_job_and_slurms_word(qtbot, fake_engine, tmp_path, monkeypatch):
    from tests.fake_slurm import FakeSlurm

    slurm = FakeSlurm(tmp_path / "slurm")
    monkeypatch.setenv("PATH", slurm.path())  # (the status process asks squeue)
    slurm.set("41", "COMPLETED")
    slurm.set("42", "PENDING", "Resources")
    trials = [Trial(0.001, 64, "completed", (0.80, 0.90), job="41"), Trial(0.01, 64, "pruned", (0.5,), job="42")]
    view = SweepView(str(write_sweep(tmp_path / "sweeps", trials)), fake_engine)
    qtbot.addWidget(view)
    view.show()
    qtbot.waitUntil(lambda: view.status is not None, timeout=30_000)
    assert [view.table.item(r, 7).text() for r in range(2)] == ["Slurm job 41: completed",
                                                                "Slurm job 42: pending (Resources)"]
    assert [t.job_state for t in view.status.trials] == ["completed", "pending (Resources)"]
