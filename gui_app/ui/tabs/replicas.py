"""The per-replica panel: local loss and gradient norm per replica, examples/s per replica and,
on GPUs, memory per device and each card's NVML figures (:mod:`.gpu_panel`), with the slowest
replica highlighted.

``ReplicasTab`` draws the run history's ``replicas`` (gui_app.core.history.replicas).
Replica ``i`` has the same colour in every chart (``plot.replica_color``). In a
multi-worker run replicas are labelled ``worker/device`` (``1/CPU:0``) and "Group by worker"
colours them by their worker; parameter-server runs report one worker per step, and each
worker's curve holds its last value until it runs another step.
"""
from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QCheckBox, QFrame, QHBoxLayout, QLabel, QScrollArea, QVBoxLayout, QWidget

import numpy as np
import pyqtgraph as pg

from gui_app.core.history import Part, RunHistory
from gui_app.core.history.replicas import SPEED_WINDOW
from gui_app.core.wording import reduction
from gui_app.ui.charts.canvas import ChartCanvas
from gui_app.ui.charts.plot import (
    HIGHLIGHT_COLOR,
    ChartPanel,
    follow_data,
    hold_top,
    make_curve,
    make_plot,
    redraw_on_zoom,
    replica_color,
    set_line_data,
    span_run,
    style_plot,
    theme_colors,
)
from gui_app.ui.charts.run_view import RunView
from gui_app.ui.tabs.gpu_panel import GpuPanel
from gui_app.ui.tabs.step_split import StepSplitPanel
from gui_app.ui.tabs.training import mark_non_finite, non_finite_line

MIB = 1024.0 ** 2
MIN_CHARTS_HEIGHT = 380  # px for the 2x2 replica charts: below it their axes crowd out the curves


class ReplicasTab(ChartPanel, RunView):
    """Per-replica panel: one curve per replica for local loss and for gradient norm (step on
    x); bars of examples/s per replica (mean of the last 20 steps) and, when ``memory_bytes``
    is reported (GPUs), memory per device; the slowest replica is outlined in red and named."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._loss_curves: list[pg.PlotDataItem] = []
        self._grad_curves: list[pg.PlotDataItem] = []
        self._drawn_devices: list | None = None  # what the ticks, legend and colours show
        self.group_by_worker = QCheckBox("Group by worker")
        self.group_by_worker.setToolTip("Colour the replicas by their worker (multi-worker runs)")
        self.group_by_worker.setVisible(False)
        self.group_by_worker.toggled.connect(self._on_grouping_toggled)

        self.slowest_label = QLabel(wordWrap=True)  # wraps rather than widen the window
        self.slowest_label.setContentsMargins(8, 4, 8, 0)
        self.slowest_label.setTextFormat(Qt.TextFormat.RichText)
        # The replica the run's diagnosis names non-finite first: its curves drawn thick, named here.
        self.non_finite_label = QLabel(wordWrap=True)
        self.non_finite_label.setContentsMargins(8, 0, 8, 0)
        self.non_finite_label.setTextFormat(Qt.TextFormat.RichText)
        self.non_finite_label.setVisible(False)
        # The worker a stall or a straggler finding names: its replicas drawn thick, named here.
        self.worker_label = QLabel(wordWrap=True)
        self.worker_label.setContentsMargins(8, 0, 8, 0)
        self.worker_label.setTextFormat(Qt.TextFormat.RichText)
        self.worker_label.setVisible(False)
        self._graphics: ChartCanvas = ChartCanvas()  # narrows the base class's "set by the subclass"
        self.loss_plot = make_plot("Local loss per replica", "step", "loss (local batch)")
        self.grad_plot = make_plot(f"Gradient norm per replica (before the {reduction(None)})", "step",
                                   "global L2 norm", legend=None)
        self.speed_plot = make_plot(f"Examples/s per replica (mean of last {SPEED_WINDOW} steps)",
                                    "replica", "examples/s", legend=None)
        self.memory_plot = make_plot("Device memory (bar: in use, outline: peak)", "replica",
                                     "memory (MiB)", legend=None)
        self.grad_plot.setXLink(self.loss_plot)
        self.non_finite_lines = [non_finite_line() for _ in range(2)]
        for plot, line in zip((self.loss_plot, self.grad_plot), self.non_finite_lines):
            plot.addItem(line, ignoreBounds=True)
        for plot in (self.loss_plot, self.grad_plot):
            redraw_on_zoom(self, plot)
        for plot in (self.speed_plot, self.memory_plot):
            plot.getAxis("left").enableAutoSIPrefix(False)
            plot.setMouseEnabled(x=False, y=False)
            plot.showGrid(x=False, y=True, alpha=0.2)
            for name in ("left", "bottom"):  # grid lines behind the bars, not across them
                plot.getAxis(name).setZValue(plot.getViewBox().zValue() - 1)
        self._speed_bars = pg.BarGraphItem(x=[], height=[], width=0.6)
        self._slowest_bar = pg.BarGraphItem(x=[0], height=[0], width=0.6, brush=None,
                                            pen=pg.mkPen(HIGHLIGHT_COLOR, width=3))
        self._slowest_text = pg.TextItem("slowest", color=HIGHLIGHT_COLOR, anchor=(0.5, 1.0))
        self.speed_plot.addItem(self._speed_bars)
        self.speed_plot.addItem(self._slowest_bar)
        self.speed_plot.addItem(self._slowest_text)
        self._peak_bars = pg.BarGraphItem(x=[], height=[], width=0.6, brush=None)
        self._memory_bars = pg.BarGraphItem(x=[], height=[], width=0.6)
        self.memory_plot.addItem(self._memory_bars)
        self.memory_plot.addItem(self._peak_bars)
        self._graphics.addItem(self.loss_plot, row=0, col=0)
        self._graphics.addItem(self.grad_plot, row=0, col=1)
        self._memory_shown = True
        self._show_memory(False)

        # Scroll rather than squeeze the four charts to strips between the GPU and step-split panels.
        self._graphics.setMinimumHeight(MIN_CHARTS_HEIGHT)
        content = QWidget()
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        scroll.setWidget(content)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.addWidget(scroll)
        layout = QVBoxLayout(content)
        layout.setContentsMargins(0, 0, 0, 0)
        top = QHBoxLayout()
        top.addWidget(self.slowest_label, 1)
        top.addWidget(self.group_by_worker)
        layout.addLayout(top)
        layout.addWidget(self.non_finite_label)
        layout.addWidget(self.worker_label)
        self.gpus = GpuPanel()  # NVML figures per GPU, shown only when the events carry them
        layout.addWidget(self.gpus)
        layout.addWidget(self._graphics, 1)
        self.step_split = StepSplitPanel()  # compute / input / all-reduce, per replica and over the run
        layout.addWidget(self.step_split)
        self._apply_palette()
        self.set_history(RunHistory())

    # --- public API -------------------------------------------------------------------
    def set_history(self, history: RunHistory) -> None:
        super().set_history(history)
        self.step_split.set_history(history)
        self.gpus.set_history(history)

    def flush(self) -> None:
        """Draw now, the step-time and GPU panels too (an opened run, tests, screenshots)."""
        super().flush()
        self.step_split.flush()
        self.gpus.flush()

    # --- drawing ----------------------------------------------------------------------
    def _history_replaced(self) -> None:
        follow_data((self.loss_plot, self.grad_plot))
        self.speed_plot.getViewBox().held_top = None
        self._drop_curves(self.history.replicas.replicas)  # an empty history (a new run): all of them
        for curves in (self._loss_curves, self._grad_curves):
            for curve in curves:  # the others are kept for this run: made again, they cost 5 ms each
                curve.setData([], [])
        self._drawn_devices = None

    def _history_changed(self, changed: int) -> None:
        started = self.history.started
        if changed & Part.RUN and started is not None:
            span_run((self.loss_plot, self.grad_plot), started.total_steps)
            joined = reduction((started.strategy or {}).get("name"))
            self.grad_plot.setTitle(f"Gradient norm per replica (before the {joined})")
        if changed & Part.REPLICAS:
            self.request_redraw()
        if changed & Part.FINDINGS:
            self._show_non_finite()
            self._show_named_worker()
            self.request_redraw()

    def non_finite_replica(self) -> int | None:
        """The replica the run's diagnosis names non-finite first, None when none."""
        found = self.history.findings.non_finite
        return found.replica if found is not None else None

    def named_worker(self) -> int | None:
        """The worker a stall (the one holding the others up) or a straggler finding names."""
        findings = self.history.findings
        for found in (findings.stall, findings.straggler):
            if found is not None and found.worker is not None:
                return found.worker
        return None

    def _show_named_worker(self) -> None:
        worker = self.named_worker()
        findings = self.history.findings
        self.worker_label.setVisible(worker is not None)
        if worker is None:
            return
        what = ("holds the others up (stalled)" if findings.stall is not None and findings.stall.worker == worker
                else "is the straggler: the others wait for it at the all-reduce")
        self.worker_label.setText(f"<b style='color:{HIGHLIGHT_COLOR}'>Worker {worker}</b> {what} "
                                  f"(its replicas drawn thick; Details… on the banner above)")

    def _show_non_finite(self) -> None:
        mark_non_finite(self.non_finite_lines, self.history)
        found = self.history.findings.non_finite
        self.non_finite_label.setVisible(found is not None and found.replica is not None)
        if found is None or found.replica is None:
            return
        worker = f" on worker {found.worker}" if found.worker is not None else ""
        self.non_finite_label.setText(
            f"Non-finite first: <b style='color:{HIGHLIGHT_COLOR}'>replica {found.replica}</b>{worker}, "
            f"its {found.first} at step {found.step} (drawn thick; Details… on the banner above)")

    def _redraw(self) -> None:
        series = self.history.replicas
        self._sync_curves()
        steps = series.steps.column(0)
        for name, curves in (("loss", self._loss_curves), ("grad_norm", self._grad_curves)):
            data = series.metrics[name].data
            for r, curve in enumerate(curves):
                set_line_data(curve, steps, data[:, r])
        named = self.named_worker()
        drawn = [list(series.devices), list(series.workers), self.group_by_worker.isChecked(),
                 self.non_finite_replica(), named]
        if drawn != self._drawn_devices:  # replicas, devices or grouping changed: relabel
            self._drawn_devices = drawn
            self.group_by_worker.setVisible(series.multi_worker)
            ticks = [[(r, f"{r}: {series.label(r)}") for r in range(series.replicas)]]
            for plot in (self.speed_plot, self.memory_plot):
                plot.getAxis("bottom").setTicks(ticks)
                plot.setXRange(-0.6, max(series.replicas, 1) - 0.4, padding=0)
            for r, curve in enumerate(self._loss_curves):
                self.loss_plot.legend.getLabel(curve).setText(self._replica_name(r))
                of_named = named is not None and r < len(series.workers) and series.workers[r] == named
                width = 3 if r == self.non_finite_replica() or of_named else 1
                for c in (curve, self._grad_curves[r]):
                    c.setPen(pg.mkPen(self._color(r), width=width))
        self._draw_speed()
        self._draw_memory()

    def _sync_curves(self) -> None:
        """One curve per replica in each line chart, created once (and dropped when a run with
        fewer replicas comes on screen: the legend names the run's replicas only)."""
        count = self.history.replicas.replicas
        self._drop_curves(count)
        for r in range(len(self._loss_curves), count):
            self._loss_curves.append(make_curve(self.loss_plot, self._color(r), self._replica_name(r)))
            self._grad_curves.append(make_curve(self.grad_plot, self._color(r)))

    def _drop_curves(self, keep: int) -> None:
        """Remove the curves of replicas ``keep`` and up (their legend entries with them)."""
        for plot, curves in ((self.loss_plot, self._loss_curves), (self.grad_plot, self._grad_curves)):
            for curve in curves[keep:]:
                plot.removeItem(curve)
            del curves[keep:]

    def _color(self, r: int):
        workers = self.history.replicas.workers
        worker = workers[r] if r < len(workers) else None
        if self.group_by_worker.isChecked() and worker is not None:
            return replica_color(worker)
        return replica_color(r)

    def _on_grouping_toggled(self, _checked: bool) -> None:
        self.request_redraw()

    def _replica_name(self, r: int) -> str:
        series = self.history.replicas
        return f"replica {r} · {series.label(r)}" if series.devices[r] else f"replica {r}"

    def _draw_speed(self) -> None:
        series = self.history.replicas
        speed = series.mean_speed()
        slowest = series.slowest()
        height = np.nan_to_num(speed)
        _set_bars(self._speed_bars, height, [self._color(r) for r in range(series.replicas)])
        hold_top(self.speed_plot, float(height.max()) if len(height) else 0.0)
        # The outline is its own item: pyqtgraph sizes a bar item by its last pen only.
        self._slowest_bar.setVisible(slowest is not None)
        if slowest is not None:
            self._slowest_bar.setOpts(x=[slowest], height=[height[slowest]])
        self._slowest_text.setVisible(slowest is not None)
        if slowest is not None:
            self._slowest_text.setPos(slowest, height[slowest])
            fastest = float(np.nanmax(speed))
            behind = 100.0 * (1.0 - speed[slowest] / fastest) if fastest > 0 else 0.0
            self.slowest_label.setText(
                f"Slowest: <b style='color:{HIGHLIGHT_COLOR}'>replica {slowest}</b> "
                f"({series.label(slowest)}), {speed[slowest]:,.0f} examples/s, "
                f"{behind:.0f}% below the fastest (mean of the last {SPEED_WINDOW} steps)")
        elif series.replicas == 1 and np.isfinite(speed).all():
            self.slowest_label.setText(f"One replica: {speed[0]:,.0f} examples/s")
        else:
            self.slowest_label.setText("Replicas: " + (str(series.replicas) if series.replicas
                                                        else "waiting for the first step"))

    def _draw_memory(self) -> None:
        memory = self.history.replicas.latest_memory()
        self._show_memory(memory is not None)
        if memory is None:
            return
        in_use, peak = (np.nan_to_num(m) / MIB for m in memory)
        colors = [self._color(r) for r in range(len(in_use))]
        _set_bars(self._memory_bars, in_use, colors)
        _set_bars(self._peak_bars, peak, colors, outline_only=True)

    def _show_memory(self, show: bool) -> None:
        """The memory chart takes the second column of the bottom row only when there is
        memory to show (CPU runs report none); otherwise the speed bars span both columns."""
        if show == self._memory_shown:
            return
        self._memory_shown = show
        graphics = self._graphics.ci
        if self.speed_plot in graphics.items:
            graphics.removeItem(self.speed_plot)
        if show:
            graphics.addItem(self.speed_plot, row=1, col=0)
            graphics.addItem(self.memory_plot, row=1, col=1)
        else:
            if self.memory_plot in graphics.items:
                graphics.removeItem(self.memory_plot)
            graphics.addItem(self.speed_plot, row=1, col=0, colspan=2)

    def _apply_palette(self) -> None:
        background, foreground = theme_colors(self)
        self._graphics.setBackground(background)
        for plot in (self.loss_plot, self.grad_plot, self.speed_plot, self.memory_plot):
            style_plot(plot, foreground, background)


def _set_bars(bars: pg.BarGraphItem, heights: np.ndarray, colors: list, outline_only: bool = False) -> None:
    """Bars at x = 0, 1, ... in the given colours (filled, or a dashed outline)."""
    if not len(heights):  # pyqtgraph 0.14 fails on empty pen lists
        bars.setOpts(x=[], height=[], pens=None, brushes=None)
        return
    x = np.arange(len(heights))
    if outline_only:
        # Same pen width for every bar: pyqtgraph sizes the item by its last pen.
        pens = [pg.mkPen(c, width=2, style=Qt.PenStyle.DashLine) for c in colors]
        bars.setOpts(x=x, height=heights, pens=pens, brushes=[QColor(0, 0, 0, 0)] * len(x))
    else:
        bars.setOpts(x=x, height=heights, brushes=colors, pens=[pg.mkPen(QColor(c).darker(130)) for c in colors])
