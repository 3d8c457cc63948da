"""run_gui: options, and startup problems shown in a dialog instead of lost on a console."""
from __future__ import annotations

from PySide6.QtWidgets import QApplication, QMessageBox

import pytest

import gui_app.ui.window.main_window as main_window_module
from gui_app.ui import application as main_module


@pytest.fixture
def dialogs(monkeypatch, qapp):
    shown = []
    monkeypatch.setattr(QMessageBox, "warning", lambda *args: shown.append(("warning", args[1], args[2])))
    monkeypatch.setattr(QMessageBox, "critical", lambda *args: shown.append(("critical", args[1], args[2])))
    monkeypatch.setattr(QApplication, "exec", lambda self: 0)  # return at once instead of running
    return shown


@pytest.fixture
def fake_window(monkeypatch, fake_engine):
    """MainWindow built with the fake engine, so no TensorFlow process starts."""
    real = main_window_module.MainWindow
    made = []

    def make(**kwargs):
        made.append(real(engine_command=fake_engine, **kwargs))
        return made[-1]

    monkeypatch.setattr(main_window_module, "MainWindow", make)
    return made


def test_help_exits_cleanly(capsys):
    assert main_module.run_gui(["--help"]) == 0
    assert "--runs-dir DIR" in capsys.readouterr().out


def test_runs_dir_and_config_options(dialogs, fake_window, tmp_path):
    config = tmp_path / "run.json"
    config.write_text('{"training": {"epochs": 3}}')
    assert main_module.run_gui(["--runs-dir", str(tmp_path / "elsewhere"), "--config", str(config)]) == 0
    (window,) = fake_window
    assert window.state.runs_dir == tmp_path / "elsewhere"
    assert window.config_panel.config().training.epochs == 3
    assert dialogs == [] and not window.isVisible()


def test_bad_config_file_is_a_warning_not_a_crash(dialogs, fake_window, tmp_path):
    config = tmp_path / "run.json"
    config.write_text('{"training": {"epochs": 0}}')
    assert main_module.run_gui(["--config", str(config)]) == 0
    assert dialogs == [("warning", "Cannot load the configuration", "training.epochs: must be at least 1; got 0")]


def test_startup_failure_is_shown_in_a_dialog(dialogs, monkeypatch):
    def broken(**kwargs):
        raise OSError("cannot create /nowhere/runs")

    monkeypatch.setattr(main_window_module, "MainWindow", broken)
    assert main_module.run_gui([]) == 1
    assert dialogs == [("critical", "Replica Studio cannot start", "OSError: cannot create /nowhere/runs")]


def test_train_option_trains_first_and_detects_devices_after_the_first_step(dialogs, qtbot, monkeypatch, fake_engine,
                                                                           tmp_path):
    """--train: the run starts as the window opens; device detection and dataset inspection (two
    more TensorFlow processes) wait for its first step instead of sharing the cores with its start."""
    fake_engine.configure("wait", steps=20)  # a few steps, then it waits for a control word
    made, commands = [], []

    def engine_command(*args):
        steps = len(made[0].shown.history.training.steps) if made else None
        commands.append((args[0], steps))
        return fake_engine(*args)

    real = main_window_module.MainWindow
    monkeypatch.setattr(main_window_module, "MainWindow",
                        lambda **kwargs: made.append(real(engine_command=engine_command, **kwargs)) or made[-1])

    def run_the_loop(_app) -> int:
        window = made[0]
        qtbot.waitUntil(lambda: {"devices", "inspect"} <= {name for name, _ in commands}, timeout=10_000)
        with qtbot.waitSignal(window.supervisor.finished, timeout=10_000):
            window.supervisor.stop()
        return 0

    monkeypatch.setattr(QApplication, "exec", run_the_loop)
    config = tmp_path / "run.json"
    config.write_text('{"training": {"epochs": 2}}')
    assert main_module.run_gui(["--config", str(config), "--train"]) == 0
    assert commands[0] == ("train", 0)
    later = dict(commands[1:])
    assert later["devices"] > 0 and later["inspect"] > 0  # asked once steps were on the charts
    assert dialogs == []


def test_train_option_does_not_train_a_config_that_failed_to_load(dialogs, fake_window, tmp_path):
    config = tmp_path / "run.json"
    config.write_text('{"training": {"epochs": 0}}')
    assert main_module.run_gui(["--config", str(config), "--train"]) == 0
    (window,) = fake_window
    assert not window.supervisor.is_active()
    assert [d[1] for d in dialogs] == ["Cannot load the configuration"]


def test_pressing_train_during_detection_and_inspection_puts_them_after_the_first_step(qtbot, fake_engine):
    """A user pressing Ctrl+R as the window opens: device detection (running) and the dataset
    inspection (asked for) are stopped and run again once the first step is on the charts, so
    the run does not start on cores shared with two more TensorFlow processes."""
    fake_engine.configure("wait", steps=20)
    window, commands = None, []

    def engine_command(*args):
        commands.append((args[0], len(window.shown.history.training.steps) if window else None))
        return fake_engine(*args)

    window = main_window_module.MainWindow(engine_command=engine_command)
    qtbot.addWidget(window)
    window.show()
    window.start()
    window.config_panel.inspector.retry()  # as an edit of the dataset would
    assert window.config_panel.devices.is_detecting() and window.config_panel.inspector.is_busy()
    with qtbot.waitSignal(window.config_panel.devices.detected, timeout=10_000):
        window.run.train()
        assert not window.config_panel.devices.is_detecting() and not window.config_panel.inspector.is_busy()
    qtbot.waitUntil(lambda: [name for name, _ in commands].count("inspect") == 1, timeout=10_000)
    started = [(name, steps) for name, steps in commands if name != "attach"]  # attach follows the run train started
    names = [name for name, _ in started]
    assert names[:2] == ["devices", "train"] and names.count("devices") == 2
    assert all(steps > 0 for _, steps in started[2:])  # detection and inspection came after steps
    with qtbot.waitSignal(window.supervisor.finished, timeout=10_000):
        window.supervisor.stop()
    window.close()
