"""The main window against the fake engine: train, stop, resume, failures, runs, settings, closing."""
from __future__ import annotations

import json
from pathlib import Path

from PySide6.QtCore import QMimeData, QPoint, Qt, QUrl
from PySide6.QtGui import QDragEnterEvent, QDropEvent, QKeySequence

import pytest
from form_errors import shown_errors
from run_dirs import listed_status, wait_listed, write_run
from windows import alive, train

from gui_app.core.events import Step
from gui_app.core.rundir import list_runs, read_run
from gui_app.ui.config.strategy_form import STRATEGY_LABELS
from gui_app.ui.dialogs.close_run import CANCEL, STOP
from gui_app.ui.settings import load_settings
from gui_app.ui.window import main_window
from gui_app.ui.window.main_window import MainWindow
from gui_app.ui.window.run_rows import NOTE
from gui_app.ui.window.window_state import EVALUATION, LOG, TRAINING, TRY


def test_shortcuts_and_first_state(window):
    a = window.window_actions
    assert a.train.shortcut() == QKeySequence("Ctrl+R") and a.stop.shortcut() == QKeySequence("Ctrl+.")
    assert a.train.isEnabled() and not a.stop.isEnabled() and not a.pause.isEnabled()
    assert window.devices_label.text().startswith("TensorFlow 2.21.0")
    assert [window.tabs.tabText(i) for i in range(window.tabs.count())] == [
        "Dataset", "Training", "Replicas", "Evaluation", "Try", "Log"]
    assert [action.text() for action in window.window_actions.export_menu.actions()] == [
        "Keras (.keras)…", "TensorFlow SavedModel (folder)…", "TensorFlow Lite, float32 (.tflite)…",
        "TensorFlow Lite, float16 weights (.tflite)…", "TensorFlow Lite, dynamic-range int8 (.tflite)…",
        "TensorFlow Lite, full-integer int8 (.tflite)…", "ONNX (.onnx)…"]
    assert not any(action.isEnabled() for action in window.window_actions.export.values())  # no run yet
    about = window.about_text()
    assert "2.21.0" in about and "3.15.1" in about and "Qt" in about and "Fake CPU" in about


def test_the_tabs_the_title_and_the_status_bar_follow_the_state(window, runs_dir):
    state = window.state
    state.set_tab(EVALUATION)
    assert window.tabs.currentWidget() is window.evaluation_tab
    window.tabs.setCurrentWidget(window.log_tab)  # a click on the tab
    assert state.tab == LOG
    window.window_actions.tabs[1].trigger()  # View → Training (Ctrl+2)
    assert window.tabs.currentWidget() is window.training_tab and state.tab == TRAINING
    state.set_status("Something to say")
    assert window.state_label.text() == "Something to say"
    state.set_shown_run(write_run(runs_dir, "first", "completed"))
    assert window.windowTitle() == "Replica Studio — first"
    state.set_shown_run(None)
    assert window.windowTitle() == "Replica Studio"


def test_getting_started_names_the_runs_folder(qtbot, window, runs_dir):
    from gui_app.ui.dialogs.getting_started import GettingStartedDialog

    window.window_actions.getting_started.trigger()
    dialog = window.findChild(GettingStartedDialog)
    assert dialog is not None and dialog.isVisible()
    text = dialog.browser.toPlainText()
    assert str(window.state.runs_dir) in text and "tensorboard --logdir" in text
    # Every strategy of the form, by the first words of its label; and what really gates Train.
    for label in STRATEGY_LABELS.values():
        assert label.split(" (")[0].lower() in text.lower(), label
    assert "the last check of the dataset and model on the forms passed" in " ".join(text.split())
    dialog.close()


def test_train_shows_live_charts_then_the_evaluation(qtbot, window, fake_engine, runs_dir):
    fake_engine.configure("normal", steps=40)
    status, run_dir, message = train(qtbot, window)
    assert (status, message) == ("completed", "")
    assert len(window.training_tab.history.training.steps) == 40
    assert window.tabs.currentWidget() is window.evaluation_tab  # shown when the run completes
    assert window.replicas_tab.history.replicas.replicas == 2
    window.tabs.setCurrentWidget(window.replicas_tab)  # hidden charts skip their redraws
    qtbot.waitUntil(lambda: len(window.replicas_tab.loss_plot.listDataItems()) == 2)
    matrix = window.evaluation_tab.heatmap.matrix
    assert matrix.shape == (10, 10) and matrix.sum() == 50
    assert window.shown.history.progress.step == 40 and window.progress.bar.value() == 40
    assert listed_status(window.runs, run_dir) == "completed"
    assert window.window_actions.train.isEnabled() and window.config_panel.widget().isEnabled()
    assert load_settings().recent_runs == [run_dir]
    # What `train --detach` answers (the run directory) is no line of the run's log.
    log = window.log_tab.view.toPlainText().splitlines()
    assert not any(line.startswith("[engine stdout]") or line.strip() == run_dir for line in log), log


def test_invalid_config_disables_train_and_its_tips_name_the_fields_in_red(window, tmp_path):
    panel, train = window.config_panel, window.window_actions.train
    panel.training.learning_rate.setText("fast")
    assert not train.isEnabled() and not window.window_actions.save_config.isEnabled()
    # Both tips (the status bar shows the status tip while the menu entry is hovered) say why, by name.
    assert train.toolTip() == train.statusTip() == "Fix the fields marked in red first: Hyperparameters → Learning rate"
    panel.dataset.name.setCurrentIndex(panel.dataset.name.findData("npz"))
    panel.dataset.path.setText(str(tmp_path / "missing.npz"))
    assert train.toolTip() == ("Fix the fields marked in red first: Dataset → Path, "
                               "Hyperparameters → Learning rate")
    window.run.train()  # the shortcut path too: nothing starts
    assert window.supervisor.state() == "idle"
    panel.dataset.name.setCurrentIndex(panel.dataset.name.findData("digits"))
    panel.training.learning_rate.setText("0.001")
    assert train.isEnabled()
    assert train.toolTip() == train.statusTip() == "Start training with this configuration (Ctrl+R)"


def test_bad_dataset_path_shows_an_error_and_the_window_stays_usable(qtbot, window, tmp_path, fake_engine):
    panel = window.config_panel
    window.files.open_dropped(str(tmp_path / "missing-folder" / "data.npz"))  # dropped, but gone
    assert "no such file or folder" in panel.dataset.status.text()
    panel.dataset.name.setCurrentIndex(panel.dataset.name.findData("npz"))
    panel.dataset.path.setText(str(tmp_path / "missing.npz"))
    assert "dataset.path" in shown_errors(panel) and not window.window_actions.train.isEnabled()
    panel.dataset.name.setCurrentIndex(panel.dataset.name.findData("digits"))
    assert window.window_actions.train.isEnabled()
    fake_engine.configure("normal", steps=10)
    assert train(qtbot, window)[0] == "completed"


def test_only_a_checked_config_is_kept_and_train_waits_for_the_check(qtbot, make_window, tmp_path):
    first = make_window()
    panel = first.config_panel
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"bad data")
    with qtbot.waitSignal(panel.inspect_failed, timeout=10_000):
        first.files.open_dropped(str(bad))
    assert panel.is_valid() and not first.window_actions.train.isEnabled()
    assert "not an .npz file" in first.window_actions.train.toolTip()
    first.run.train()  # Ctrl+R's path: nothing starts
    assert first.supervisor.state() == "idle"
    first.close()
    assert load_settings().last_config["dataset"]["name"] == "digits"  # the last config that passed
    second = make_window()
    assert second.config_panel.config().dataset.name == "digits" and second.window_actions.train.isEnabled()


def test_engine_crash_is_reported_in_a_dialog_and_the_run_list(qtbot, window, fake_engine):
    fake_engine.configure("crash")
    status, run_dir, message = train(qtbot, window)
    assert (status, message) == ("failed", "RuntimeError: fake engine crashed on purpose")
    assert window.run.failure_box is not None and window.run.failure_box.isVisible()
    assert window.run.failure_box.text() == message
    window.run.failure_box.close()
    assert listed_status(window.runs, run_dir) == "interrupted"  # on disk: no run_finished, resumable
    item = window.runs.tree.topLevelItem(0)
    assert item.data(0, Qt.ItemDataRole.UserRole) == run_dir and item.text(NOTE) == message
    assert window.window_actions.train.isEnabled()
    assert "RuntimeError: fake engine crashed on purpose" in window.log_tab.view.toPlainText()


def test_pause_stop_then_resume_completes_the_run(qtbot, window, fake_engine):
    fake_engine.configure("wait", steps=20)
    sup, a = window.supervisor, window.window_actions
    has_step = lambda batch: any(isinstance(e, Step) for e in batch)  # noqa: E731
    with qtbot.waitSignal(sup.events, check_params_cb=has_step, timeout=10_000):
        a.train.trigger()
    assert a.pause.isEnabled() and a.stop.isEnabled() and a.checkpoint.isEnabled()
    assert not a.train.isEnabled() and not window.config_panel.widget().isEnabled()
    with qtbot.waitSignal(sup.state_changed, check_params_cb=lambda s: s == "paused", timeout=5000):
        a.pause.trigger()
    assert a.pause.text() == "&Continue"
    with qtbot.waitSignal(sup.finished, timeout=10_000) as finished:
        a.stop.trigger()
    status, run_dir, _ = finished.args
    wait_listed(qtbot, window.runs)
    assert status == "stopped" and listed_status(window.runs, run_dir) == "stopped"
    assert window.run.failure_box is None
    steps_before = len(window.training_tab.history.training.steps)
    assert 0 < steps_before < 20
    window.runs.select(run_dir)
    assert window.runs.resume_button.isEnabled() and a.resume_run.isEnabled()
    fake_engine.configure("normal", steps=20)
    with qtbot.waitSignal(sup.finished, timeout=10_000) as finished:
        window.runs.resume_button.click()
    assert finished.args[:2] == ["completed", run_dir]
    assert len(window.training_tab.history.training.steps) == 20  # history plus the resumed steps, no duplicates
    assert window.evaluation_tab.heatmap.matrix.sum() == 50
    assert [r.status for r in list_runs(window.state.runs_dir)] == ["completed"]



def test_a_big_runs_history_is_read_off_the_gui_thread_before_it_resumes(qtbot, window, fake_engine, monkeypatch):
    """Resume shows the run's history first; a big run's (over READ_HERE_BYTES: here every run,
    and its read made 1.5 s slow, as a run of GBs without its pyramid is) is read on a thread, the
    window's timers running meanwhile, then the run resumes and completes with each step once."""
    from gui_gaps import gui_thread_gaps, slowed

    from gui_app.ui.window import run_actions

    fake_engine.configure("wait", steps=20)
    sup = window.supervisor
    with qtbot.waitSignal(sup.events, check_params_cb=lambda b: any(isinstance(e, Step) for e in b), timeout=10_000):
        window.window_actions.train.trigger()
    with qtbot.waitSignal(sup.finished, timeout=10_000) as finished:
        window.window_actions.stop.trigger()
    run_dir = finished.args[1]
    wait_listed(qtbot, window.runs)
    monkeypatch.setattr(run_actions, "READ_HERE_BYTES", 0)
    on_gui = slowed(monkeypatch, run_actions, "read_history", 1.5)
    window.runs.select(run_dir)
    fake_engine.configure("normal", steps=20)
    with gui_thread_gaps() as gaps, qtbot.waitSignal(sup.finished, timeout=20_000) as finished:
        window.runs.resume_button.click()
        window.runs.resume_button.click()  # a second press while it reads: still one resume
    assert on_gui == [False]
    assert max(gaps) < 0.7, max(gaps)
    assert finished.args[:2] == ["completed", run_dir]
    steps = window.training_tab.history.training.steps
    assert len(steps) == 20  # the history read, then the resumed steps: none twice

def test_the_status_line_of_a_run_s_end_goes_with_the_run(qtbot, window, fake_engine, runs_dir, tmp_path):
    other = write_run(runs_dir, "other", "completed", steps=12, accuracy=0.9)
    fake_engine.configure("wait", steps=20)
    sup, label = window.supervisor, window.state_label
    with qtbot.waitSignal(sup.events, check_params_cb=lambda batch: any(isinstance(e, Step) for e in batch),
                          timeout=10_000):
        window.window_actions.train.trigger()
    with qtbot.waitSignal(sup.finished, timeout=10_000):
        window.window_actions.stop.trigger()
    wait_listed(qtbot, window.runs)
    assert label.text().startswith("Run stopped at step ") and label.text().endswith(" of 20")
    window.state.set_tab(TRAINING)  # looking at the same run: its line stays
    assert label.text().startswith("Run stopped at step ")
    window.runs.select(other)
    window.runs.open_button.click()  # another run on screen: the line was not about it
    assert window.shown.path == str(other) and label.text() == "Ready"

    fake_engine.configure("normal", steps=10)
    run_dir = train(qtbot, window)[1]
    assert label.text() == "Run completed"
    (Path(run_dir) / "model.keras").write_bytes(b"")  # the fake engine saves none; the dialog only opens
    window.runs.select(run_dir)
    window.runs.open_button.click()  # the same run, read again: its line stays
    assert label.text() == "Run completed"
    window.settings.last_export_dir = str(tmp_path)
    window.window_actions.export["onnx"].trigger()  # the user turned to an export
    assert window.models.export_dialog.isVisible() and label.text() == "Ready"
    window.models.export_dialog.close()

    train(qtbot, window)
    assert label.text() == "Run completed"
    window.state.set_tab(TRY)  # ... or to the Try tab
    assert label.text() == "Ready"


def test_closing_during_a_run_asks_cancel_then_stop(qtbot, window, fake_engine, monkeypatch):
    fake_engine.configure("wait")
    with qtbot.waitSignal(window.supervisor.run_started, timeout=10_000) as started:
        window.window_actions.train.trigger()
    run_dir = started.args[0].run_dir
    pid = json.loads((Path(run_dir) / "process.json").read_text())["pid"]  # the run's process
    monkeypatch.setattr(main_window, "ask_close_during_run", lambda parent: CANCEL)
    window.close()
    assert window.isVisible() and window.supervisor.state() == "running"  # the user said no
    monkeypatch.setattr(main_window, "ask_close_during_run", lambda parent: STOP)
    with qtbot.waitSignal(window.supervisor.finished, timeout=10_000) as finished:
        window.close()
        assert window.isVisible()  # waits for the engine before closing
    assert finished.args[0] == "stopped"
    qtbot.waitUntil(lambda: not window.isVisible(), timeout=5000)
    qtbot.waitUntil(lambda: not alive(pid), timeout=5000)  # the run's process has ended (not our child)
    assert read_run(run_dir).status == "stopped" and read_run(run_dir).resumable  # with a checkpoint


def test_open_and_overlay_past_runs(qtbot, window, runs_dir):
    first = write_run(runs_dir, "first", "completed", steps=12, accuracy=0.9)
    second = write_run(runs_dir, "second", "stopped", steps=5, started=1.7e9 + 100)
    window.runs.refresh()
    wait_listed(qtbot, window.runs)
    assert window.files.open_run(str(first))
    assert len(window.training_tab.history.training.steps) == 12
    assert window.replicas_tab.history.replicas.replicas == 2
    assert window.evaluation_tab.heatmap.matrix.sum() == 10
    assert window.windowTitle() == "Replica Studio — first"
    window.runs.select(first, second)
    main, other = window.runs.selected_paths()
    window.runs.overlay_button.click()
    assert len(window.training_tab.history.training.steps) == {str(first): 12, str(second): 5}[main]
    assert f"overlaid with {Path(other).name}" in window.progress.label.text()
    window.files.open_dropped(str(second))  # dropping a run folder opens it
    assert len(window.training_tab.history.training.steps) == 5 and window.evaluation_tab.heatmap.matrix is None
    assert [Path(p).name for p in window.settings.recent_runs[:2]] == ["second", "first"]


def test_export_menu_follows_the_selected_run_or_the_run_on_screen_and_says_why_it_is_off(qtbot, window, runs_dir,
                                                                                           tmp_path):
    stopped = write_run(runs_dir, "stopped", "stopped", steps=5)
    trained = write_run(runs_dir, "trained", "completed", steps=12, started=1.7e9 + 100, accuracy=0.9)
    (trained / "model.keras").write_bytes(b"")  # the dialog only opens; nothing is exported here
    window.runs.refresh()
    wait_listed(qtbot, window.runs)
    export = window.window_actions.export

    def off_because() -> str:
        assert not any(action.isEnabled() for action in export.values())
        assert export["onnx"].toolTip() == export["onnx"].statusTip()  # the status bar says it on hover too
        return export["onnx"].toolTip()

    assert off_because() == "Select a run with a trained model in the run list (or open one) first"
    window.runs.select(stopped)
    assert off_because() == "stopped has no trained model or checkpoint to export"
    (stopped / "checkpoints" / "ckpt-5.index").write_bytes(b"")
    window.runs.open_button.click()
    assert export["onnx"].isEnabled()  # stopped early: its last checkpoint is exported
    window.runs.select(trained)  # selected, not opened: a completed run exports its model at once
    assert window.shown.path == str(stopped) and all(action.isEnabled() for action in export.values())
    assert export["onnx"].toolTip() == "Export trained as ONNX (.onnx)"
    window.settings.last_export_dir = str(tmp_path)
    export["tflite-int8"].trigger()
    dialog = window.models.export_dialog
    assert dialog.isVisible() and dialog.format_name() == "tflite-int8" and "trained" in dialog.windowTitle()
    assert dialog.output_path() == tmp_path / "trained-int8.tflite"
    dialog.close()
    window.files.new_run()
    assert export["keras"].isEnabled()  # the selection still names a run
    window.runs.tree.clearSelection()
    assert off_because().startswith("Select a run")
    window.runs.select(trained)
    window.runs.export_button.click()  # the run list exports the selected run, whatever is on screen
    dialog = window.models.export_dialog
    assert dialog.format_name() == "keras" and "trained" in dialog.windowTitle()
    window.models.export_dialog.close()


def test_drops_on_the_try_tab_and_elsewhere(qtbot, window, tmp_path):
    image, data = tmp_path / "seven.png", tmp_path / "data.npz"
    image.write_bytes(b"png")
    data.write_bytes(b"npz")
    window.tabs.setCurrentWidget(window.try_tab)
    panel = window.try_tab

    def drag_enter(path) -> bool:
        mime = QMimeData()
        mime.setUrls([QUrl.fromLocalFile(str(path))])
        event = QDragEnterEvent(QPoint(5, 5), Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton,
                                Qt.KeyboardModifier.NoModifier)
        event.ignore()
        panel.dragEnterEvent(event)
        return event.isAccepted()

    assert drag_enter(image) and drag_enter(tmp_path / "m.tflite")
    assert not drag_enter(data) and not drag_enter(tmp_path)  # datasets go on to the window
    window.tabs.setCurrentWidget(window.training_tab)
    window.files.open_dropped(str(image))  # an image dropped anywhere is for the Try tab's model
    assert window.tabs.currentWidget() is panel and "Open a model first" in panel._status.text()
    window.files.open_dropped(str(data))  # anything else is still a dataset
    assert window.tabs.currentWidget() is window.dataset_tab
    with qtbot.waitSignal(panel.failed, timeout=10_000) as failed:
        window.files.open_dropped(str(tmp_path / "gone.tflite"))  # an exported model is for the Try tab
    assert window.tabs.currentWidget() is panel and failed.args[0].endswith("gone.tflite: no such file or folder")


def test_config_files_and_drops(window, tmp_path):
    config = window.config_panel.config().replace(training={"epochs": 9})
    path = tmp_path / "run.json"
    config.save(path)
    window.files.open_dropped(str(path))
    assert window.config_panel.config() == config
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"training": {"epochz": 1}}))
    with pytest.raises(ValueError, match="training.epochz: unknown key"):
        window.files.load_config_file(bad)
    model = tmp_path / "net.keras"
    model.write_bytes(b"x")
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(model))])
    window.dropEvent(QDropEvent(QPoint(5, 5), Qt.DropAction.CopyAction, mime, Qt.MouseButton.NoButton,
                                Qt.KeyboardModifier.NoModifier))
    assert window.config_panel.config().model.path == str(model)


def test_settings_persist_between_windows(qtbot, make_window):
    first = make_window()
    first.config_panel.training.epochs.setValue(7)
    first.resize(first.minimumSizeHint().width(), 640)  # the offscreen screen is only 800x800
    size = first.size()
    first.close()
    second = make_window()
    assert second.config_panel.config().training.epochs == 7
    assert second.size() == size


def test_tools_scaling_benchmark_measures_the_config_on_the_forms(qtbot, window, runs_dir):
    assert window.window_actions.tools["scaling"].isEnabled()
    window.config_panel.training.global_batch_size.setValue(48)
    window.window_actions.tools["scaling"].trigger()
    dialog = window.tools.dialog
    assert dialog is not None and dialog.isVisible()
    assert dialog._config.training.global_batch_size == 48
    with qtbot.waitSignal(dialog.succeeded, timeout=10_000):
        dialog.start()
    assert dialog._table.rowCount() == 3
    dialog.reject()
    qtbot.waitUntil(lambda: window.tools.dialog is None, timeout=5_000)
    scaling = window.window_actions.tools["scaling"]
    window.supervisor.state_changed.connect(lambda s: seen.append((s, scaling.isEnabled())))
    seen: list = []
    train(qtbot, window)  # no bursts while training: the entry is disabled during a run, enabled after
    assert ("running", False) in seen and scaling.isEnabled()


def test_tools_prepare_dataset_opens_on_the_forms_dataset(qtbot, window, tmp_path):
    window.window_actions.tools["prepare"].trigger()
    dialog = window.tools.dialog
    assert dialog is not None and dialog.isVisible()
    command = dialog.command()
    assert command[command.index("prepare") + 1].endswith(".json") and "--json" in command
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_bytes(b"")
    dialog._output.setText(str(tmp_path / "full"))
    with qtbot.waitSignal(dialog.failed, timeout=10_000) as failed:
        dialog.start()
    assert failed.args == [f"--output: {tmp_path / 'full'} exists and is not an empty folder"]
    log = window.log_tab.view.toPlainText()
    assert f"replica-studio prepare: {failed.args[0]}" in log  # the engine's stderr: the Log tab
    dialog.reject()
    qtbot.waitUntil(lambda: window.tools.dialog is None, timeout=5_000)


def test_the_tools_menu_is_the_list_of_tools(window):
    from gui_app.ui.window.tool_actions import TOOLS

    menu = next(a.menu() for a in window.menuBar().actions() if a.text() == "&Tools")
    # The tools, then the sweeps (gui_app/ui/window/sweep_actions.py), then the hosts.
    assert [a.text() for a in menu.actions()] == [tool.label for tool in TOOLS] + [
        "", "New s&weep…", "&Open sweep…", "", "&Hosts…"]
    assert window.window_actions.new_sweep.isEnabled()
    window.config_panel.training.learning_rate.setText("fast")  # invalid: only tools that need no config
    assert {key: action.isEnabled() for key, action in window.window_actions.tools.items()} == {
        tool.key: not tool.needs_valid_config for tool in TOOLS}
    assert not window.window_actions.new_sweep.isEnabled() and window.window_actions.open_sweep.isEnabled()


def test_a_failed_run_resumes_with_the_changes_asked_for(qtbot, fake_engine, runs_dir):
    run = write_run(runs_dir, "20261201-090000-digits-mnist_cnn", "failed", steps=8,
                    message="out of memory with 32 examples per replica")
    (run / "checkpoints" / "ckpt-8.index").write_bytes(b"")  # resumable: it checkpointed before failing
    commands: list[list[str]] = []
    window = MainWindow(engine_command=lambda *args: commands.append(list(args)) or fake_engine(*args))
    qtbot.addWidget(window)
    window.show()
    wait_listed(qtbot, window.runs)
    window.runs.select(str(run))
    assert window.runs.resume_button.isEnabled()
    window.runs.resume_button.click()
    dialog = window.run.resume_dialog
    assert dialog is not None and dialog.isVisible() and not window.supervisor.is_active()
    dialog.batch.setValue(16)
    with qtbot.waitSignal(window.supervisor.finished, timeout=15_000) as finished:
        dialog._on_accept()  # the Resume button
    resume = next(c for c in commands if c[0] == "resume")
    assert resume[resume.index("--set") + 1] == "training.global_batch_size=16"
    assert finished.args[0] == "completed"
