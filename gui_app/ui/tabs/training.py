"""The Training tab: loss, accuracy and learning rate per step with each epoch's validation
point, drawn from the run's history (gui_app.core.history.training), and optionally a second
run's series as a dashed overlay for comparison.
"""
from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDoubleSpinBox, QHBoxLayout, QLabel, QVBoxLayout, QWidget

import numpy as np
import pyqtgraph as pg

from gui_app.core.history import Part, RunHistory
from gui_app.core.history.training import (
    ACCURACY,
    ACCURACY_EMA,
    LOSS,
    LOSS_EMA,
    LR,
    STEP,
    VAL_ACCURACY,
    VAL_LOSS,
    VAL_STEP,
    TrainingSeries,
)
from gui_app.ui.charts.canvas import ChartCanvas
from gui_app.ui.charts.plot import (
    HIGHLIGHT_COLOR,
    OVERLAY_COLOR,
    TRAIN_COLOR,
    VALIDATION_COLOR,
    ChartPanel,
    CompactAxis,
    follow_data,
    make_curve,
    make_plot,
    redraw_on_zoom,
    set_line_data,
    span_run,
    style_plot,
    theme_colors,
)
from gui_app.ui.charts.run_view import RunView
from gui_app.ui.charts.zoom_detail import ZoomDetail
from gui_app.ui.labels import ItemLine
from gui_app.ui.tabs.input_bound import InputBoundLabel

LR_HEADROOM = 1.15  # the learning-rate axis runs from 0 to this much above the largest rate


def learning_rate_top(*series: np.ndarray) -> float | None:
    """The top of the learning-rate axis (which starts at 0): a little above the largest
    finite rate, so a constant rate is a readable line below the top, not the middle of a
    ±0.4 axis. None when there is no positive rate yet."""
    values = np.concatenate([np.asarray(s, dtype=float).ravel() for s in series]) if series else np.empty(0)
    values = values[np.isfinite(values)]
    if not values.size or values.max() <= 0:
        return None
    return float(values.max()) * LR_HEADROOM


def non_finite_line() -> pg.InfiniteLine:
    """A dashed vertical line at the first non-finite step, hidden until there is one."""
    line = pg.InfiniteLine(angle=90, movable=False, pen=pg.mkPen(HIGHLIGHT_COLOR, width=2, style=Qt.PenStyle.DashLine),
                           label="non-finite", labelOpts={"position": 0.92, "color": HIGHLIGHT_COLOR})
    line.setVisible(False)
    return line


def mark_non_finite(lines: list[pg.InfiniteLine], history: RunHistory) -> None:
    """Put ``lines`` at the run's non-finite step (its diagnosis), or hide them."""
    found = history.findings.non_finite
    for line in lines:
        line.setVisible(found is not None and found.step is not None)
        if found is not None and found.step is not None:
            line.setValue(found.step)


class TrainingTab(ChartPanel, RunView):
    """Loss and accuracy per step (raw thin line + EMA-smoothed line), validation points per
    epoch (plotted at their step), and the learning rate per step."""

    def __init__(self, parent: QWidget | None = None, smoothing: float = 0.9) -> None:
        super().__init__(parent)
        self._overlay: TrainingSeries | None = None
        self._overlay_curves: list[tuple[pg.PlotItem, pg.PlotDataItem]] = []

        # Every figure whole (it was cut at "val accur…" on a 1280 px screen): a second line
        # between two figures when the tab is narrow, and never a wider window.
        self._summary = ItemLine()
        self.smoothing = QDoubleSpinBox()
        self.smoothing.setRange(0.0, 0.999)
        self.smoothing.setDecimals(3)
        self.smoothing.setSingleStep(0.05)
        self.smoothing.setValue(smoothing)
        self.smoothing.setToolTip("Weight of the history in the smoothed curves (0 = raw values)")
        self.smoothing.valueChanged.connect(self._on_smoothing_changed)
        header = QHBoxLayout()
        header.setContentsMargins(8, 4, 8, 0)
        header.addWidget(self._summary, 1)
        header.addWidget(QLabel("Smoothing"))
        header.addWidget(self.smoothing)

        self._graphics: ChartCanvas = ChartCanvas()  # narrows the base class's "set by the subclass"
        self.loss_plot = make_plot("Loss", "step", "loss (cross-entropy)")
        self.accuracy_plot = make_plot("Accuracy", "step", "accuracy (%)", legend="bottom")
        self.lr_plot = make_plot("Learning rate", "step", "learning rate", legend=None,
                                 axis_items={"left": CompactAxis("left")})
        self._lr_top: float | None = None
        # The step that went non-finite (the run's diagnosis), a vertical line on every chart.
        self.non_finite_lines = [non_finite_line() for _ in range(3)]
        for plot, line in zip((self.loss_plot, self.accuracy_plot, self.lr_plot), self.non_finite_lines):
            plot.addItem(line, ignoreBounds=True)
        self._graphics.addItem(self.loss_plot, row=0, col=0)
        self._graphics.addItem(self.accuracy_plot, row=0, col=1)
        self._graphics.addItem(self.lr_plot, row=1, col=0, colspan=2)
        grid = self._graphics.ci.layout
        grid.setRowStretchFactor(0, 3)
        grid.setRowStretchFactor(1, 1)
        # Only plots of equal width are linked: pyqtgraph links views by screen position.
        self.accuracy_plot.setXLink(self.loss_plot)
        for plot in (self.loss_plot, self.accuracy_plot, self.lr_plot):
            redraw_on_zoom(self, plot)

        self._curves = {  # column of TrainingSeries.steps -> its curve
            LOSS: make_curve(self.loss_plot, TRAIN_COLOR, "per step", alpha=80),
            LOSS_EMA: make_curve(self.loss_plot, TRAIN_COLOR, "smoothed"),
            ACCURACY: make_curve(self.accuracy_plot, TRAIN_COLOR, "per step", alpha=80),
            ACCURACY_EMA: make_curve(self.accuracy_plot, TRAIN_COLOR, "smoothed"),
            LR: make_curve(self.lr_plot, TRAIN_COLOR),
        }
        self._val_curves = {
            VAL_LOSS: make_curve(self.loss_plot, VALIDATION_COLOR, "validation", symbol="o"),
            VAL_ACCURACY: make_curve(self.accuracy_plot, VALIDATION_COLOR, "validation", symbol="o"),
        }
        # A long run opened from its pyramid: the steps in view read again when zoomed in.
        self.zoom_detail = ZoomDetail(self.loss_plot, self.request_redraw, self)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(header)
        self.input_bound = InputBoundLabel()  # shown when the replicas wait for data
        layout.addWidget(self.input_bound)
        layout.addWidget(self._graphics, 1)
        self._apply_palette()
        self.set_history(RunHistory(smoothing))

    # --- public API -------------------------------------------------------------------
    def set_history(self, history: RunHistory) -> None:
        super().set_history(history)
        self.input_bound.set_history(history)

    def set_overlay(self, series: TrainingSeries | None, label: str = "") -> None:
        """Draw a second run's smoothed curves, validation points and learning rate dashed on
        the same charts; ``None`` removes them."""
        for plot, curve in self._overlay_curves:
            plot.removeItem(curve)  # also removes its legend entry
        self._overlay_curves.clear()
        self._overlay = series
        if series is not None:
            series.set_smoothing(self.smoothing.value())
            name = label or "other run"
            dash = Qt.PenStyle.DashLine
            specs = ((self.loss_plot, f"{name}", False), (self.loss_plot, f"{name} validation", True),
                     (self.accuracy_plot, f"{name}", False), (self.accuracy_plot, f"{name} validation", True),
                     (self.lr_plot, None, False))
            for plot, curve_name, symbols in specs:
                curve = make_curve(plot, OVERLAY_COLOR, curve_name, style=dash,
                                   symbol="o" if symbols else None)
                self._overlay_curves.append((plot, curve))
        self.flush()

    # --- drawing ----------------------------------------------------------------------
    def _history_replaced(self) -> None:
        self.zoom_detail.reset(self.history)
        self.history.training.set_smoothing(self.smoothing.value())
        follow_data((self.loss_plot, self.accuracy_plot, self.lr_plot))  # a zoom of the last run goes
        self._lr_top = None

    def _history_changed(self, changed: int) -> None:
        started = self.history.started
        if changed & Part.RUN and started is not None:
            span_run((self.loss_plot, self.accuracy_plot, self.lr_plot), started.total_steps)
        if changed & Part.TRAINING:
            self.request_redraw()
        if changed & Part.FINDINGS:
            mark_non_finite(self.non_finite_lines, self.history)

    def _redraw(self) -> None:
        series = self.history.training
        data = series.steps.data
        if self.zoom_detail.detail is not None:  # the steps in view, finer than the run's buckets
            detail = self.zoom_detail.detail[2].training
            detail.set_smoothing(self.smoothing.value())
            data = self.zoom_detail.splice(data, detail.steps.data, STEP)
        steps = data[:, STEP]
        for col, curve in self._curves.items():
            set_line_data(curve, steps, data[:, col])
        val = series.validation.data
        for col, curve in self._val_curves.items():
            keep = ~np.isnan(val[:, col])
            curve.setData(val[keep, VAL_STEP], val[keep, col])
        self._summary.setText(series.summary(self.history.progress.step))  # the step the progress line names
        if self._overlay is not None:
            self._draw_overlay(self._overlay)
        self._fit_learning_rate_axis()

    def _fit_learning_rate_axis(self) -> None:
        """0 to a bit above the largest rate; set only when that changes, so a zoom the user
        made stays until the schedule reaches a new maximum."""
        rates = [self.history.training.steps.column(LR)]
        if self._overlay is not None:
            rates.append(self._overlay.steps.column(LR))
        top = learning_rate_top(*rates)
        if top is None:
            self._lr_top = None
            self.lr_plot.enableAutoRange(axis="y")
        elif top != self._lr_top:
            self._lr_top = top
            self.lr_plot.setYRange(0.0, top, padding=0.0)  # also turns the y auto-range off

    def _draw_overlay(self, overlay: TrainingSeries) -> None:
        data, val = overlay.steps.data, overlay.validation.data
        columns = ((data, LOSS_EMA), (val, VAL_LOSS), (data, ACCURACY_EMA), (val, VAL_ACCURACY), (data, LR))
        for (_, curve), (source, col) in zip(self._overlay_curves, columns):
            keep = ~np.isnan(source[:, col]) if source is val else slice(None)
            curve.setData(source[keep, 0], source[keep, col])

    def _on_smoothing_changed(self, value: float) -> None:
        self.history.training.set_smoothing(value)
        if self._overlay is not None:
            self._overlay.set_smoothing(value)
        self.request_redraw()

    def _apply_palette(self) -> None:
        background, foreground = theme_colors(self)
        self._graphics.setBackground(background)
        for plot in (self.loss_plot, self.accuracy_plot, self.lr_plot):
            style_plot(plot, foreground, background)
