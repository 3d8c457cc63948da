"""A real sweep from the window: the New sweep dialog starts ``sweep --detach`` with the real engine
(two digits trials of the MLP, two at a time), and the sweep view follows it to its end."""
from __future__ import annotations

import math

import pytest

from gui_app.core.config import RunConfig
from gui_app.identity import app_command
from gui_app.ui.sweep.new_sweep import NewSweepDialog
from gui_app.ui.sweep.parameter_table import HIGH
from gui_app.ui.sweep.view import SweepView

pytestmark = pytest.mark.slow


def test_a_sweep_started_from_the_dialog_runs_detached_and_its_view_follows_it(qtbot, tmp_path):
    base = RunConfig.from_dict({"dataset": {"name": "digits"}, "model": {"name": "mlp"},
                                "strategy": {"name": "default"}, "training": {"epochs": 2, "seed": 1}})
    dialog = NewSweepDialog(base, tmp_path / "sweeps", app_command)
    qtbot.addWidget(dialog)
    dialog.trials_box.setValue(2)
    dialog.parallel_box.setValue(2)
    dialog.method_box.setCurrentIndex(dialog.method_box.findData("grid"))
    dialog.rows.widget(0, HIGH).setText("0.01")  # the grid: two of 0.0001, 0.001 and 0.01
    assert dialog.error.text() == "" and dialog.start_button.isEnabled()
    with qtbot.waitSignal(dialog.started, timeout=60_000) as started:
        dialog.start()
    view = SweepView(started.args[0], app_command)
    qtbot.addWidget(view)
    ended = []
    view.ended.connect(lambda *args: ended.append(args))
    qtbot.waitUntil(lambda: view.status is not None and view.status.running, timeout=30_000)
    qtbot.waitUntil(lambda: bool(ended), timeout=240_000)
    assert ended[0][0] == "completed" and ended[0][2].startswith("sweep completed: 2 trials (2 completed")
    assert [view.table.item(r, 1).text() for r in range(view.table.rowCount())] == ["completed", "completed"]
    best, trials = view.best(), view.status.trials
    assert best.metric == max(t.metric for t in trials) and 0 < best.metric <= 1
    rates = {round(math.log10(t.parameters["training.learning_rate"]), 6) for t in trials}
    assert len(rates) == 2 and rates <= {-4.0, -3.0, -2.0}  # two points of the grid
    curves = view.reader.curves  # (read as the trials ran, then once more after the sweep's last status)
    qtbot.waitUntil(lambda: len(curves) == 2 and all(len(c.epochs) == 2 for c in curves.values()), timeout=10_000)
    view.charts.flush()
    assert len(view.charts.trial_curves) == 2 and all(len(c.getData()[0]) == 2 for c in view.charts.trial_curves)
    assert set(view.status.importance) == {"training.learning_rate"}
    view.close()
