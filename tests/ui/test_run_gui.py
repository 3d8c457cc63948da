"""run_gui: options, and startup problems shown in a dialog instead of lost on a console."""
from __future__ import annotations

import pytest
from PySide6.QtWidgets import QApplication, QMessageBox

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
    assert window.runs_dir == tmp_path / "elsewhere"
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
