"""TrainingTab, ReplicasTab and their helpers, drawing run histories of synthetic events
(docs/events.md)."""
from __future__ import annotations

import math
import os
import subprocess
import sys
import time

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import numpy as np
import pytest

from gui_app.core import events as ev
from gui_app.core.history import RunHistory
from gui_app.core.history.buffers import Ema, GrowableArray, ema
from gui_app.ui.charts.plot import CompactAxis, compact_number, replica_color
from gui_app.ui.tabs.replicas import MIB, ReplicasTab
from gui_app.ui.tabs.training import LR_HEADROOM, TrainingTab


def run_started(replicas: int = 2, start_step: int = 0, resumed: bool = False, kind: str = "CPU") -> ev.RunStarted:
    devices = [f"/job:localhost/replica:0/task:0/device:{kind}:{i}" for i in range(replicas)]
    return ev.RunStarted(run_dir="", config={}, resumed=resumed, start_step=start_step, total_steps=100,
                         steps_per_epoch=25, epochs=4, num_replicas=replicas,
                         replicas=[ev.ReplicaInfo(replica=i, device=d) for i, d in enumerate(devices)])


def step(n: int, loss: float | None = 1.0, accuracy: float | None = 0.5, lr: float = 0.01,
         speeds: tuple[float, ...] = (1000.0, 800.0), memory: tuple | None = None) -> ev.Step:
    replicas = [ev.ReplicaStats(replica=r, device=f"/job:localhost/replica:0/task:0/device:CPU:{r}",
                                loss=(loss or 0.0) + 0.1 * r, accuracy=accuracy, examples=32, grad_norm=2.0 + r,
                                step_time=32 / speed, examples_per_sec=speed,
                                memory_bytes=None if memory is None else memory[r],
                                peak_memory_bytes=None if memory is None else 2 * memory[r])
                for r, speed in enumerate(speeds)]
    return ev.Step(time=float(n), step=n, epoch=1 + (n - 1) // 25, loss=loss, accuracy=accuracy, learning_rate=lr,
                   examples_per_sec=sum(speeds), step_time=0.04, replicas=replicas)


def epoch_end(epoch: int, at_step: int, val_loss: float | None, val_accuracy: float | None) -> ev.EpochEnd:
    return ev.EpochEnd(time=float(at_step), epoch=epoch, step=at_step, loss=1.0, accuracy=0.5, val_loss=val_loss,
                       val_accuracy=val_accuracy, duration=1.0)


def overlay(events: list[ev.Event]):
    """Another run's training series, for an overlay."""
    history = RunHistory()
    history.add(events)
    return history.training


def curve(plot, name: str):
    (item,) = [c for c in plot.listDataItems() if c.name() == name]
    return item


def xy(item) -> tuple[np.ndarray, np.ndarray]:
    x, y = item.getOriginalDataset()
    return (np.array([]), np.array([])) if x is None else (np.asarray(x), np.asarray(y))


@pytest.fixture
def training(qtbot) -> TrainingTab:
    widget = TrainingTab()
    qtbot.addWidget(widget)
    return widget


@pytest.fixture
def replica(qtbot) -> ReplicasTab:
    widget = ReplicasTab()
    qtbot.addWidget(widget)
    return widget


# --- helpers ------------------------------------------------------------------------------
def test_growable_array_doubles_and_keeps_rows():
    buf = GrowableArray(2, capacity=4)
    for i in range(1000):
        buf.append((i, 2 * i))
    assert len(buf) == 1000
    assert buf.data[-1].tolist() == [999, 1998]
    buf.truncate(10)
    buf.set_columns(3)
    assert buf.data.shape == (10, 3) and np.isnan(buf.column(2)).all()


def test_ema_is_debiased_and_skips_nan():
    # w = 0.5: 1 -> 1; then (0.25 + 1) / 0.75; NaN repeats; then (0.625 + 1.5) / 0.875
    assert ema(np.array([1.0, 2.0, np.nan, 3.0]), 0.5) == pytest.approx([1.0, 5 / 3, 5 / 3, 2.125 / 0.875])
    assert ema(np.array([4.0, 6.0]), 0.0).tolist() == [4.0, 6.0]
    with pytest.raises(ValueError, match="smoothing"):
        Ema(1.0)


# --- TrainingTab -----------------------------------------------------------------------
def test_training_buffers_steps_and_draws_raw_and_smoothed(training):
    events = [run_started()] + [step(n, loss=float(n), accuracy=n / 100) for n in range(1, 51)]
    training.history.add(events + [ev.Checkpoint(step=50, path="x"), ev.Warning(message="mystery")])
    assert len(training.history.training.steps) == 50
    training.flush()
    x, y = xy(curve(training.loss_plot, "per step"))
    assert x.tolist() == list(range(1, 51)) and y[-1] == 50.0
    _, acc = xy(curve(training.accuracy_plot, "per step"))
    assert acc[-1] == pytest.approx(50.0)  # percent
    _, lr = xy(training.lr_plot.listDataItems()[0])
    assert len(lr) == 50 and lr[0] == 0.01


def test_learning_rate_axis_starts_at_zero_and_covers_the_largest_rate(training):
    lr_range = lambda: training.lr_plot.getViewBox().viewRange()[1]  # noqa: E731
    training.history.add([step(n, lr=0.001) for n in range(1, 21)])  # constant: was a ±0.4 axis
    training.flush()
    assert lr_range() == pytest.approx([0.0, 0.001 * LR_HEADROOM])
    training.history.add([step(n, lr=0.001 * (1 + n / 10)) for n in range(21, 31)])  # a schedule rises
    training.flush()
    assert lr_range() == pytest.approx([0.0, 0.004 * LR_HEADROOM])
    training.set_overlay(overlay([step(n, lr=0.05) for n in range(1, 5)]), "other")  # the overlay counts too
    assert lr_range() == pytest.approx([0.0, 0.05 * LR_HEADROOM])
    assert isinstance(training.lr_plot.getAxis("left"), CompactAxis)
    assert training.lr_plot.getAxis("left").tickStrings([0.0, 0.0005, 0.001], 1.0, 0.0005) == ["0", "0.0005", "0.001"]
    assert [compact_number(v) for v in (1e-5, 2.5e-4, 0.0012000000001, 0.1)] == ["1e-5", "0.00025", "0.0012", "0.1"]


def test_training_ema_values(training):
    training.smoothing.setValue(0.5)
    training.history.add([step(1, loss=1.0), step(2, loss=2.0), step(3, loss=None), step(4, loss=3.0)])
    training.flush()
    _, smoothed = xy(curve(training.loss_plot, "smoothed"))
    assert smoothed == pytest.approx([1.0, 5 / 3, 5 / 3, 2.125 / 0.875])
    training.smoothing.setValue(0.0)  # recomputed from the raw values
    training.flush()
    _, smoothed = xy(curve(training.loss_plot, "smoothed"))
    assert smoothed == pytest.approx([1.0, 2.0, 2.0, 3.0])


def test_validation_points_are_plotted_at_their_step(training):
    training.history.add([step(n) for n in range(1, 51)]
                        + [epoch_end(1, 25, 0.8, 0.7), epoch_end(2, 50, 0.6, None), epoch_end(3, 60, None, None)])
    training.flush()
    x, y = xy(curve(training.loss_plot, "validation"))
    assert x.tolist() == [25, 50] and y.tolist() == [0.8, 0.6]
    x, y = xy(curve(training.accuracy_plot, "validation"))
    assert x.tolist() == [25] and y == pytest.approx([70.0])


def test_resumed_run_continues_the_curves(training):
    first = [run_started()] + [step(n) for n in range(1, 36)] + [epoch_end(1, 25, 0.5, 0.5)]
    # Killed after step 35; the checkpoint was at step 30, so steps 31..35 are trained again.
    second = [run_started(start_step=30, resumed=True)] + [step(n, loss=9.0) for n in range(31, 61)]
    training.history.add(first)
    training.history.add(second)
    assert len(training.history.training.steps) == 60
    training.flush()
    x, y = xy(curve(training.loss_plot, "per step"))
    assert x.tolist() == list(range(1, 61))
    assert y[29] == 1.0 and y[30] == 9.0
    assert xy(curve(training.loss_plot, "validation"))[0].tolist() == [25]


def test_overlay_adds_dashed_curves_and_clears(training):
    before = len(training.loss_plot.listDataItems()), len(training.lr_plot.listDataItems())
    training.history.add([step(n) for n in range(1, 11)])
    other = [step(n, loss=2.0) for n in range(1, 21)] + [epoch_end(1, 20, 1.5, 0.4)]
    training.set_overlay(overlay(other), "run B")
    assert len(training.loss_plot.listDataItems()) == before[0] + 2
    assert len(training.accuracy_plot.listDataItems()) == before[0] + 2
    assert len(training.lr_plot.listDataItems()) == before[1] + 1
    x, y = xy(curve(training.loss_plot, "run B"))
    assert len(x) == 20 and y[-1] == pytest.approx(2.0)
    assert xy(curve(training.loss_plot, "run B validation"))[1].tolist() == [1.5]
    assert "run B" in [label.text for _, label in training.loss_plot.legend.items]
    training.set_overlay(None)
    assert len(training.loss_plot.listDataItems()) == before[0]
    assert len(training.lr_plot.listDataItems()) == before[1]
    assert "run B" not in [label.text for _, label in training.loss_plot.legend.items]
    assert len(training.history.training.steps) == 10


def test_another_history_empties(training):
    training.history.add([step(n) for n in range(1, 11)] + [epoch_end(1, 10, 0.5, 0.5)])
    training.set_history(RunHistory())
    training.flush()
    assert len(training.history.training.steps) == 0
    assert len(xy(curve(training.loss_plot, "per step"))[0]) == 0
    assert len(xy(curve(training.loss_plot, "validation"))[0]) == 0


def test_redraw_waits_for_the_timer(training, qtbot):
    training.show()
    qtbot.waitExposed(training)
    training.history.add([step(n) for n in range(1, 6)])
    raw = curve(training.loss_plot, "per step")
    assert len(xy(raw)[0]) == 0  # the history only buffers: the redraw waits for the timer
    qtbot.waitUntil(lambda: len(xy(raw)[0]) == 5, timeout=2000)


def test_an_idle_chart_redraws_at_once_and_a_busy_one_at_most_thirty_times_a_second(qtbot):
    from gui_app.ui.charts.throttle import REDRAW_INTERVAL_MS, RedrawThrottle

    drawn: list[float] = []
    throttle = RedrawThrottle(lambda: drawn.append(time.perf_counter()))
    throttle.request()
    assert throttle._timer.remainingTime() == 0  # idle: on the next turn of the event loop
    qtbot.waitUntil(lambda: len(drawn) == 1, timeout=2000)
    throttle.request()  # just drawn: waits out the rest of the interval
    assert 0 < throttle._timer.remainingTime() <= REDRAW_INTERVAL_MS
    deadline = time.perf_counter() + 0.5
    while time.perf_counter() < deadline:  # a request on every turn of the loop for half a second
        throttle.request()
        qtbot.wait(1)
    qtbot.waitUntil(lambda: not throttle._timer.isActive(), timeout=2000)
    gaps = [b - a for a, b in zip(drawn, drawn[1:])]
    assert len(drawn) <= 2 + 0.5 * 1000 / REDRAW_INTERVAL_MS and min(gaps) >= 0.9 * REDRAW_INTERVAL_MS / 1000, gaps


def test_hundred_thousand_points_stay_downsampled(training):
    n = 100_000
    started = time.perf_counter()
    for first in range(1, n + 1, 1000):
        training.history.add([ev.Step(step=s, loss=1.0 / s, accuracy=0.5, learning_rate=0.1)
                              for s in range(first, first + 1000)])
    buffering = time.perf_counter() - started
    assert len(training.history.training.steps) == n
    started = time.perf_counter()
    training.flush()
    training.resize(900, 500)
    training.grab()  # paints: the real cost of one redraw
    redraw = time.perf_counter() - started
    raw = curve(training.loss_plot, "per step")
    x, y = xy(raw)
    assert len(x) <= 2 * 1000 + 100  # decimated to the plot's pixel width (set_line_data)
    assert x[0] == 1 and x[-1] == n and y.max() == 1.0  # the ends and the peak survive
    assert raw.opts["autoDownsample"] and raw.opts["clipToView"] and raw.opts["downsampleMethod"] == "peak"
    print(f"100k steps: folded {buffering:.2f} s, one redraw + paint {1000 * redraw:.0f} ms")


# --- ReplicasTab ------------------------------------------------------------------------
def test_two_replicas_give_two_curves_per_chart(replica):
    replica.history.add([run_started(2)] + [step(n) for n in range(1, 31)])
    replica.flush()
    assert replica.history.replicas.replicas == 2 and len(replica.loss_plot.listDataItems()) == 2
    assert len(replica.loss_plot.listDataItems()) == 2 and len(replica.grad_plot.listDataItems()) == 2
    x, y = xy(replica.grad_plot.listDataItems()[1])
    assert len(x) == 30 and y[0] == 3.0
    labels = [label.text for _, label in replica.loss_plot.legend.items]
    assert labels == ["replica 0 · CPU:0", "replica 1 · CPU:1"]


def test_replica_count_comes_from_the_first_step_without_run_started(replica):
    replica.history.add([step(1, speeds=(10.0, 20.0, 30.0))])
    replica.flush()
    assert replica.history.replicas.replicas == 3 and len(replica.loss_plot.listDataItems()) == 3


def test_same_colour_for_a_replica_in_every_chart(replica):
    replica.history.add([run_started(2)] + [step(n) for n in range(1, 5)])
    replica.flush()
    for r in range(2):
        loss_pen = replica.loss_plot.listDataItems()[r].opts["pen"]
        grad_pen = replica.grad_plot.listDataItems()[r].opts["pen"]
        assert loss_pen.color().name() == grad_pen.color().name() == replica_color(r).name()


def test_slowest_replica_is_the_lowest_recent_examples_per_sec(replica):
    replica.history.add([run_started(2)] + [step(n, speeds=(1000.0, 800.0)) for n in range(1, 41)])
    replica.flush()
    text = replica.slowest_label.text()
    assert text.startswith("Slowest: ") and "replica 1</b>" in text and "800 examples/s, 20% below the fastest" in text
    # Replica 0 slows down: the mean of the last 20 steps decides.
    replica.history.add([step(n, speeds=(500.0, 800.0)) for n in range(41, 61)])
    replica.flush()
    assert "replica 0</b>" in replica.slowest_label.text()


def test_one_replica_has_no_slowest(replica):
    replica.history.add([run_started(1)] + [step(n, speeds=(1000.0,)) for n in range(1, 5)])
    replica.flush()
    assert replica.history.replicas.replicas == 1 and replica.slowest_label.text() == "One replica: 1,000 examples/s"


def test_memory_chart_only_with_gpu_memory(replica):
    replica.history.add([run_started(2)] + [step(n) for n in range(1, 5)])
    replica.flush()
    assert replica.memory_plot not in replica._graphics.ci.items
    replica.history.add([step(n, memory=(100 * MIB, 300 * MIB)) for n in range(5, 8)])
    replica.flush()
    assert replica.memory_plot in replica._graphics.ci.items
    assert list(replica._memory_bars.opts["height"]) == [100.0, 300.0]
    assert list(replica._peak_bars.opts["height"]) == [200.0, 600.0]
    replica.set_history(RunHistory())
    replica.flush()
    assert replica.memory_plot not in replica._graphics.ci.items


def test_replica_resume_continues_and_reset_empties(replica):
    replica.history.add([run_started(2)] + [step(n) for n in range(1, 21)])
    replica.history.add([run_started(2, start_step=15, resumed=True)] + [step(n) for n in range(16, 31)])
    replica.flush()
    x, _ = xy(replica.loss_plot.listDataItems()[0])
    assert x.tolist() == list(range(1, 31))
    replica.set_history(RunHistory())
    assert replica.history.replicas.replicas == 0 and len(replica.loss_plot.listDataItems()) == 0
    replica.flush()
    assert replica.slowest_label.text() == "Replicas: waiting for the first step"


def test_another_run_keeps_the_replica_curves_it_has_replicas_for(replica):
    """Opening a run after another keeps the curves of as many replicas as it has (making them
    again was most of the Replicas tab's cost of an Open) and drops the others, legend and all."""
    first = RunHistory()
    first.add([run_started(3)] + [step(n, speeds=(1000.0, 800.0, 900.0)) for n in range(1, 11)])
    replica.set_history(first)
    replica.flush()
    kept = list(replica._loss_curves)
    assert len(kept) == 3
    second = RunHistory()
    second.add([run_started(2)] + [step(n) for n in range(1, 6)])
    replica.set_history(second)
    replica.flush()
    assert replica._loss_curves == kept[:2] and replica.loss_plot.listDataItems() == kept[:2]
    assert [label.text for _, label in replica.loss_plot.legend.items] == [replica._replica_name(r) for r in (0, 1)]
    assert xy(kept[0])[0].tolist() == [1, 2, 3, 4, 5]  # the new run's steps, none of the old run's


def test_replica_charts_buffer_a_long_run(replica):
    replica.history.add([run_started(2)])
    for first in range(1, 20_001, 1000):
        replica.history.add([step(s) for s in range(first, first + 1000)])
    replica.flush()
    assert replica.history.replicas.steps.column(0)[-1] == 20_000  # all buffered
    x, _ = xy(replica.loss_plot.listDataItems()[0])
    assert x[0] == 1 and x[-1] == 20_000 and len(x) < 20_000  # drawn decimated to the plot width
    assert math.isclose(replica._speed_bars.opts["height"][0], 1000.0)


def test_a_hidden_chart_redraws_when_shown(training, qtbot):
    training.history.add([step(n) for n in range(1, 6)])
    qtbot.waitUntil(lambda: training._stale, timeout=2000)  # the timer fired, and skipped the redraw
    raw = curve(training.loss_plot, "per step")
    assert len(xy(raw)[0]) == 0  # skipped: nobody can see it
    training.show()
    qtbot.waitUntil(lambda: len(xy(raw)[0]) == 5, timeout=2000)


def test_chart_modules_do_not_import_tensorflow():
    code = ("import sys, gui_app.ui.tabs.training, gui_app.ui.tabs.replicas, gui_app.ui.tabs.evaluation;"
            "sys.exit('tensorflow' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], env={**os.environ, "QT_QPA_PLATFORM": "offscreen"},
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr


def test_plots_follow_a_palette_change(training):
    from PySide6.QtGui import QColor, QPalette

    palette = training.palette()
    palette.setColor(QPalette.ColorRole.Base, QColor("#101010"))
    palette.setColor(QPalette.ColorRole.Text, QColor("#eeeeee"))
    training.setPalette(palette)
    assert training._graphics.backgroundBrush().color().name() == "#101010"
    assert training.loss_plot.getAxis("left").textPen().color().name() == "#eeeeee"


def test_decimate_keeps_every_peak_and_the_ends():
    import numpy as np

    from gui_app.ui.charts.plot import decimate

    x = np.arange(100_000, dtype=np.float64)
    y = np.sin(x / 500.0)
    y[12_345] = 9.0  # one spike
    y[54_321] = -9.0
    y[70_000] = np.nan  # a step without a value: skipped, not spread over its bin
    dx, dy = decimate(x, y, 1000)
    assert len(dx) == len(dy) <= 2 * 1000 + 100
    assert dy.max() == 9.0 and dy.min() == -9.0
    assert not np.isnan(dy).any()
    assert dx[0] == 0 and dx[-1] == 99_999 and np.all(np.diff(dx) >= 0)
    short_x, short_y = decimate(x[:100], y[:100], 1000)
    assert len(short_x) == 100  # small inputs come back as they are


def test_dense_curves_are_decimated_to_the_plot_width_and_follow_a_zoom(qtbot):
    from synthetic import synthetic_events

    from gui_app.ui.tabs.training import TrainingTab

    charts = TrainingTab()
    qtbot.addWidget(charts)
    charts.resize(1000, 600)
    charts.show()
    charts.history.add(synthetic_events(steps=50_000, epochs=5, replicas=2))
    charts.flush()
    curve = next(iter(charts._curves.values()))
    x, _ = curve.getData()
    assert len(x) <= 2 * 1000 + 100  # not 50,000
    assert x[0] <= 1 and x[-1] >= 49_999
    charts.loss_plot.setXRange(10_000, 11_000, padding=0)  # the user zooms in
    charts.flush()
    x, _ = curve.getData()
    assert x.min() >= 9_000 and x.max() <= 12_000
    assert len(x) >= 900  # every step in view, not a decimated whole


def test_the_x_axis_spans_the_planned_run_and_follows_more_steps(replica):
    replica.history.add([run_started(2)] + [step(n) for n in range(1, 31)])
    replica.flush()
    lo, hi = replica.loss_plot.viewRange()[0]
    assert lo <= 0 and 100 <= hi <= 104  # total_steps 100: fixed, not following the 30 steps
    replica.history.add([step(n) for n in range(31, 201)])  # more than planned
    replica.flush()
    replica.loss_plot.getViewBox().updateAutoRange()
    assert replica.loss_plot.viewRange()[0][1] >= 200
    replica.set_history(RunHistory())
    assert replica.loss_plot.getViewBox().state["autoRange"][0]


def test_speed_bars_keep_a_round_top_until_speeds_leave_it(replica):
    from gui_app.ui.charts.plot import _nice_ceiling

    assert _nice_ceiling(1150.0) == 1200.0 and _nice_ceiling(0.9) == 1.0 and _nice_ceiling(7.0) == 8.0
    replica.history.add([run_started(2)] + [step(n, speeds=(1000.0, 800.0)) for n in range(1, 31)])
    replica.flush()
    top = replica.speed_plot.viewRange()[1][1]
    assert 1000 < top <= 1500
    replica.history.add([step(n, speeds=(1050.0, 900.0)) for n in range(31, 61)])
    replica.flush()
    assert replica.speed_plot.viewRange()[1][1] == top  # small changes: the axis stays
    replica.history.add([step(n, speeds=(5000.0, 4000.0)) for n in range(61, 121)])
    replica.flush()
    assert replica.speed_plot.viewRange()[1][1] >= 5000


def test_the_replicas_tab_says_where_each_steps_time_goes_and_names_the_bottleneck(qtbot):
    from gui_app.ui.tabs.replicas import ReplicasTab

    charts = ReplicasTab()
    qtbot.addWidget(charts)
    started = ev.RunStarted(run_dir="", config={}, num_replicas=2,
                            replicas=[ev.ReplicaInfo(replica=r, device=f"CPU:{r}") for r in range(2)])

    def step(n, wall, compute, waited):
        return ev.Step(step=n, step_time=wall, input_wait=waited,
                       replicas=[ev.ReplicaStats(replica=r, device=f"CPU:{r}", step_time=compute * (1 - r / 10),
                                                 examples=8, loss=1.0, accuracy=0.5, grad_norm=1.0,
                                                 examples_per_sec=8 / compute) for r in range(2)])

    charts.history.add([started] + [step(n, 0.10, 0.04, 0.01) for n in range(1, 11)])
    assert charts.history.timing.shares() == pytest.approx((0.4, 0.1, 0.5))
    text = charts.step_split.label.text()
    assert "compute 40% · input 10% · all-reduce and optimizer 50%" in text and "larger global batch" in text
    charts.history.add([step(n, 0.10, 0.09, 0.0) for n in range(11, 61)])  # compute-bound: no advice
    assert "compute 90%" in charts.step_split.label.text() and "<b>" not in charts.step_split.label.text()
    bars = charts.history.timing.per_replica()  # replica 1 computes 10 % faster: it waits longer
    assert bars.shape == (2, 3) and bars[1, 0] < bars[0, 0] and bars[1, 2] > bars[0, 2]
    assert bars.sum(axis=1) == pytest.approx([0.10, 0.10])  # each bar is the whole step
    charts.step_split.flush()
    assert len(charts.history.timing.history) == 60
    charts.set_history(RunHistory())
    assert charts.history.timing.shares() is None and not charts.step_split.isVisible()


def test_a_parameter_server_run_is_not_said_to_all_reduce(qtbot):
    from gui_app.ui.tabs.replicas import ReplicasTab

    charts = ReplicasTab()
    qtbot.addWidget(charts)
    assert "all-reduce" in charts.grad_plot.titleLabel.text  # before a run: the usual case
    started = ev.RunStarted(run_dir="", config={}, strategy={"name": "parameter_server"}, num_replicas=1,
                            replicas=[ev.ReplicaInfo(replica=0, device="CPU:0")])
    step = ev.Step(step=1, step_time=0.1, input_wait=0.01,
                   replicas=[ev.ReplicaStats(replica=0, device="CPU:0", step_time=0.05, examples=8, loss=1.0,
                                             accuracy=0.5, grad_norm=1.0, examples_per_sec=160.0)])
    charts.history.add([started, step])
    assert "parameter-server updates" in charts.grad_plot.titleLabel.text
    assert "all-reduce" not in charts.grad_plot.titleLabel.text
    text = charts.step_split.label.text()
    assert "parameter-server updates and optimizer" in text and "all-reduce" not in text
