"""Fixtures for the UI tests: offscreen Qt, settings and runs in tmp_path, a fast fake engine."""
from __future__ import annotations

import contextlib
import os
import signal
import sys
from pathlib import Path

# Before anything imports Qt: no display is needed, and PySide6 comes before pyqtgraph.
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("PYQTGRAPH_QT_LIB", "PySide6")

import pytest

FAKE_ENGINE = Path(__file__).with_name("fake_engine.py")


@pytest.fixture(scope="package", autouse=True)
def _garbage_collected_on_the_gui_thread(qapp):
    """The window's own policy (gui_app/ui/gc_guard.py): no collection on a worker thread, where
    a cycle holding a widget from an earlier test deadlocked in ~QObject. Off again after the UI
    tests, for the TensorFlow tests that follow in the same process."""
    from gui_app.ui import gc_guard

    gc_guard.install(qapp)
    yield
    gc_guard.uninstall()


@pytest.fixture(autouse=True)
def isolated_dirs(tmp_path, monkeypatch):
    """Every test gets its own settings folder, runs folder and sweeps folder (the run list
    lists the sweeps' trials too)."""
    config_dir, runs_dir = tmp_path / "config", tmp_path / "runs"
    monkeypatch.setenv("REPLICA_STUDIO_CONFIG_DIR", str(config_dir))
    monkeypatch.setenv("REPLICA_STUDIO_RUNS_DIR", str(runs_dir))
    monkeypatch.setenv("REPLICA_STUDIO_SWEEPS_DIR", str(tmp_path / "window-sweeps"))
    # No desktop notifications from the tests on a developer's session bus (tests/ui/test_notifications.py
    # brings its own bus).
    monkeypatch.delenv("DBUS_SESSION_BUS_ADDRESS", raising=False)
    return config_dir, runs_dir


@pytest.fixture
def runs_dir(isolated_dirs) -> Path:
    return isolated_dirs[1]


@pytest.fixture
def fake_engine(monkeypatch, runs_dir):
    """An ``engine_command`` replacement running tests/ui/fake_engine.py; returns a setter
    for its mode (``normal``, ``wait``, ``crash``, ``hang``, ``gpu``), step count and step time. Its runs
    are detached: any still running in ``runs_dir`` at the end of the test is killed."""
    monkeypatch.setenv("FAKE_ENGINE_MODE", "normal")

    def engine_command(*args: str) -> list[str]:
        return [sys.executable, str(FAKE_ENGINE), *args]

    def configure(mode: str = "normal", steps: int = 20, step_seconds: float = 0.0) -> None:
        monkeypatch.setenv("FAKE_ENGINE_MODE", mode)
        monkeypatch.setenv("FAKE_ENGINE_STEPS", str(steps))
        monkeypatch.setenv("FAKE_ENGINE_STEP_SECONDS", str(step_seconds))

    engine_command.configure = configure
    yield engine_command
    stop_live_runs(runs_dir)


@pytest.fixture(autouse=True)
def _close_question_answers_keep(monkeypatch):
    """Closing a window during a run answers "Keep training in the background" without the modal box.

    pytest-qt closes a test's widgets before the fixtures' teardown: a test that failed with a run
    still live would otherwise leave the box open and hang the whole suite. Tests that mean another
    answer patch it themselves; stop_live_runs ends the run kept.
    """
    from gui_app.ui.dialogs.close_run import KEEP
    from gui_app.ui.window import main_window

    monkeypatch.setattr(main_window, "ask_close_during_run", lambda parent: KEEP)


@pytest.fixture
def panel(qtbot, fake_engine):
    """The config panel over the fake engine, filled with the first-launch config."""
    from gui_app.ui.config.config_panel import ConfigPanel, first_launch_config

    panel = ConfigPanel(fake_engine)
    qtbot.addWidget(panel)
    panel.set_config(first_launch_config())
    yield panel
    panel.inspector.cancel()
    panel.devices.cancel_detection()


@pytest.fixture
def real_window(qtbot, runs_dir):
    """The main window with the real engine (each engine process costs seconds: slow tests)."""
    from windows import shown_window

    with shown_window(qtbot) as window:
        yield window
    stop_live_runs(runs_dir)


def stop_live_runs(runs_dir: Path) -> None:
    """Kill every run still running in ``runs_dir`` (a test that failed left it: runs are detached)."""
    from gui_app.core.live_runs import list_live_runs

    for run in list_live_runs(runs_dir) if runs_dir.is_dir() else ():
        with contextlib.suppress(ProcessLookupError, AttributeError):  # AttributeError: not running
            os.kill(run.process.pid, signal.SIGKILL)


@pytest.fixture
def make_window(qtbot, fake_engine):
    """Makes main windows over the fake engine, shown and started (devices detected)."""
    from gui_app.ui.window.main_window import MainWindow

    windows = []

    def make() -> MainWindow:
        window = MainWindow(engine_command=fake_engine)
        qtbot.addWidget(window)
        window.show()
        with qtbot.waitSignal(window.config_panel.devices.detected, timeout=10_000):
            window.start()
        windows.append(window)
        return window

    yield make
    for window in windows:
        window.supervisor.close()  # lets go of a run a failed test left (fake_engine ends it)
        window.settings.confirm_close_during_run = False
        window.close()


@pytest.fixture
def window(make_window):
    """One main window over the fake engine."""
    return make_window()


@pytest.fixture
def sweep_log(tmp_path, monkeypatch) -> Path:
    """Where the fake sweep engine logs the commands it is given (sweep_dirs.logged_commands)."""
    log = tmp_path / "sweep-commands.jsonl"
    monkeypatch.setenv("FAKE_SWEEP_LOG", str(log))
    return log
