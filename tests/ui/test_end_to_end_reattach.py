"""The window with the real engine, killed with SIGKILL mid-run and launched again: the run went on
without it, the new window lists it as running, follows it with every step once, and Stop stops
it (docs/detached.md). Each engine process costs seconds of TensorFlow start-up: slow."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from run_dirs import listed_status, wait_listed

from gui_app.core.config import DatasetConfig, RunConfig, StrategyConfig, TrainingConfig
from gui_app.core.events import Step
from gui_app.core.live_runs import list_live_runs
from gui_app.core.rundir import read_run
from gui_app.ui.window.main_window import MainWindow

pytestmark = pytest.mark.slow

# Long enough to outlive the first window's start, its death and the second window's start.
CONFIG = RunConfig(dataset=DatasetConfig(name="digits"), strategy=StrategyConfig(name="one_device"),
                   training=TrainingConfig(epochs=200, global_batch_size=64, steps_per_call=1))
ENGINE_TIMEOUT_S = 240  # two cores shared with other work: a ceiling


def _running_run(runs_dir, deadline: float) -> str:
    while time.monotonic() < deadline:
        live = list_live_runs(runs_dir) if runs_dir.is_dir() else []
        if live and live[0].info.step > 0:
            return str(live[0].info.path)
        time.sleep(0.2)
    raise AssertionError("the first window's run did not start")


def test_a_window_killed_mid_run_is_followed_again_by_the_next(qtbot, runs_dir, tmp_path):
    config = tmp_path / "config.json"
    config.write_text(CONFIG.to_json())
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    first = subprocess.Popen([sys.executable, "-m", "gui_app", "--runs-dir", str(runs_dir), "--config", str(config),
                              "--train"], env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    try:
        run_dir = _running_run(runs_dir, time.monotonic() + ENGINE_TIMEOUT_S)
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(30)
    window = MainWindow(runs_dir=runs_dir)
    qtbot.addWidget(window)
    window.show()
    try:
        qtbot.waitUntil(lambda: window.state.active_run == run_dir, timeout=30_000)  # followed at launch
        wait_listed(qtbot, window.runs)
        assert listed_status(window.runs, run_dir) == "running"
        has_step = lambda batch: any(isinstance(e, Step) for e in batch)  # noqa: E731
        with qtbot.waitSignal(window.supervisor.events, check_params_cb=has_step, timeout=30_000):
            pass  # live steps
        with qtbot.waitSignal(window.supervisor.finished, timeout=ENGINE_TIMEOUT_S * 1000) as finished:
            window.window_actions.stop.trigger()
        assert finished.args[:2] == ["stopped", run_dir]
        last = read_run(run_dir).step
        steps = [int(s) for s in window.shown.history.training.steps.column(0)]
        assert last > 0 and steps == list(range(1, last + 1))  # every step once
    finally:
        window.settings.confirm_close_during_run = False
        window.close()
