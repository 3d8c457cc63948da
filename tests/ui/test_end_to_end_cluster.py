"""The window with the real engine on a local two-worker MultiWorkerMirrored cluster: the
supervisor starts one process (the launcher), the Replicas tab shows both workers' replicas."""
from __future__ import annotations

import sys

import pytest
from run_dirs import listed_status, train_to_end, wait_listed

from gui_app.core.config import ModelConfig, RunConfig, StrategyConfig, TrainingConfig

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(sys.platform != "linux", reason="local clusters are tested on Linux")]

CONFIG = RunConfig(model=ModelConfig(name="mlp"), strategy=StrategyConfig(name="multi_worker_mirrored", workers=2),
                   training=TrainingConfig(epochs=1, global_batch_size=64, steps_per_call=5))
ENGINE_TIMEOUT_MS = 240_000


def test_a_two_worker_cluster_from_the_window(qtbot, real_window):
    window = real_window
    window.config_panel.set_config(CONFIG)
    run, run_dir = train_to_end(qtbot, window, ENGINE_TIMEOUT_MS)
    assert run.num_workers == 2 and [r.worker for r in run.replicas] == [0, 1]
    window.tabs.setCurrentWidget(window.replicas_tab)
    qtbot.waitUntil(lambda: len(window.replicas_tab.loss_plot.listDataItems()) == 2)
    series = window.shown.history.replicas
    assert [series.label(r) for r in range(2)] == ["0/CPU:0", "1/CPU:0"]
    wait_listed(qtbot, window.runs)
    assert listed_status(window.runs, run_dir) == "completed"
