"""The window with the real engine: digits, mirrored over two CPU replicas (issue 3's
acceptance test). Each engine process costs ~6 s of TensorFlow start-up, so these are slow."""
from __future__ import annotations

from PySide6.QtWidgets import QLabel, QProgressBar

import pytest
from run_dirs import listed_status, train_to_end, wait_listed

from gui_app.core.config import RunConfig, RuntimeConfig, StrategyConfig, TrainingConfig
from gui_app.core.events import Step

pytestmark = pytest.mark.slow

CONFIG = RunConfig(strategy=StrategyConfig(name="mirrored", devices=("CPU:0", "CPU:1")),
                   training=TrainingConfig(epochs=1, global_batch_size=64, steps_per_call=3),
                   runtime=RuntimeConfig(cpu_devices=2))
ENGINE_TIMEOUT_MS = 240_000  # two cores shared with other work: be generous, it is only a ceiling


def test_train_digits_on_two_cpu_replicas(qtbot, real_window):
    window = real_window
    window.config_panel.set_config(CONFIG)
    with qtbot.waitSignals([window.config_panel.devices.detected, window.config_panel.inspected],
                           timeout=ENGINE_TIMEOUT_MS):
        window.start()
    bars = window.dataset_tab.findChildren(QProgressBar)  # one row per class: its count and its samples
    samples = [label for label in window.dataset_tab.findChildren(QLabel) if not label.pixmap().isNull()]
    assert len(bars) == 10 and len(samples) == 10
    assert window.config_panel.model.layers.topLevelItemCount() > 3

    run, run_dir = train_to_end(qtbot, window, ENGINE_TIMEOUT_MS)
    assert run.num_replicas == 2 and run.total_steps > 5
    assert len(window.training_tab.history.training.steps) == run.total_steps  # one point per step
    matrix = window.evaluation_tab.heatmap.matrix
    assert matrix.shape == (10, 10) and matrix.sum() == run.dataset["test_examples"]
    window.tabs.setCurrentWidget(window.replicas_tab)
    qtbot.waitUntil(lambda: len(window.replicas_tab.loss_plot.listDataItems()) == 2)
    wait_listed(qtbot, window.runs)
    assert listed_status(window.runs, run_dir) == "completed"


def test_stop_in_the_middle_then_resume(qtbot, real_window):
    window = real_window
    window.config_panel.set_config(CONFIG.replace(training={"epochs": 2, "steps_per_call": 1}))
    window.config_panel.inspector.cancel()  # not needed here: keep the two cores for training
    sup = window.supervisor
    has_step = lambda batch: any(isinstance(e, Step) for e in batch)  # noqa: E731
    with qtbot.waitSignal(sup.events, check_params_cb=has_step, timeout=ENGINE_TIMEOUT_MS):
        window.window_actions.train.trigger()
    # Pause first so the stop lands in the middle however fast the steps are.
    with qtbot.waitSignal(sup.state_changed, check_params_cb=lambda s: s == "paused", timeout=60_000):
        window.window_actions.pause.trigger()
    with qtbot.waitSignal(sup.finished, timeout=60_000) as finished:
        window.window_actions.stop.trigger()
    status, run_dir, _ = finished.args
    wait_listed(qtbot, window.runs)
    assert status == "stopped" and listed_status(window.runs, run_dir) == "stopped"
    window.runs.select(run_dir)
    assert window.runs.resume_button.isEnabled()
    with qtbot.waitSignal(sup.run_started, timeout=ENGINE_TIMEOUT_MS) as started, \
            qtbot.waitSignal(sup.finished, timeout=ENGINE_TIMEOUT_MS) as finished:
        window.runs.resume_button.click()
    assert finished.args[:2] == ["completed", run_dir], finished.args[2]
    assert started.args[0].resumed is True and started.args[0].start_step > 0
    assert len(window.training_tab.history.training.steps) == started.args[0].total_steps
    assert window.evaluation_tab.heatmap.matrix.shape == (10, 10)
