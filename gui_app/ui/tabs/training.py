"""Loss, accuracy and learning rate per step, with epoch validation points.

``TrainingSeries`` turns events into numpy columns (no Qt); ``TrainingCharts`` draws one
series live and, optionally, a second run's series as a dashed overlay for comparison.
"""
from __future__ import annotations

import math
from typing import Any, Iterable

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDoubleSpinBox, QHBoxLayout, QLabel, QVBoxLayout, QWidget

import numpy as np
import pyqtgraph as pg

from gui_app.ui.charts.plot import (
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
from gui_app.ui.charts.series import Ema, GrowableArray, number
from gui_app.ui.tabs.input_bound import InputBoundLabel

STEP, LOSS, ACCURACY, LR, LOSS_EMA, ACCURACY_EMA = range(6)
VAL_STEP, VAL_LOSS, VAL_ACCURACY = range(3)
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


class TrainingSeries:
    """The per-step and per-epoch numbers of one run, built from its events.

    Accuracy is stored in percent. Steps stay strictly increasing (clip-to-view needs it):
    a ``run_started`` whose ``start_step`` is behind the last point, or a step that was already
    seen, drops the points after it, so a resumed run continues the curves from its
    checkpoint and a replayed step replaces the old one.
    """

    def __init__(self, smoothing: float = 0.9) -> None:
        self.steps = GrowableArray(6)
        self.validation = GrowableArray(3, capacity=64)
        self._loss_ema = Ema(smoothing)
        self._accuracy_ema = Ema(smoothing)

    @property
    def smoothing(self) -> float:
        return self._loss_ema.smoothing

    def clear(self) -> None:
        self.steps.clear()
        self.validation.clear()
        self._loss_ema.reset()
        self._accuracy_ema.reset()

    def add_events(self, events: Iterable[dict[str, Any]]) -> bool:
        """Append what the events carry; True when anything changed."""
        changed = False
        for event in events:
            changed |= self.add(event)
        return changed

    def add(self, event: dict[str, Any]) -> bool:
        kind = event.get("type")
        if kind == "step":
            step = number(event.get("step"))
            if math.isnan(step):
                return False
            if len(self.steps) and step <= self.steps.last(STEP):
                self.truncate_after(step - 1)
            loss = number(event.get("loss"))
            accuracy = 100.0 * number(event.get("accuracy"))
            self.steps.append((step, loss, accuracy, number(event.get("learning_rate")),
                               self._loss_ema.update(loss), self._accuracy_ema.update(accuracy)))
            return True
        if kind == "epoch_end":
            step = number(event.get("step"))
            val_loss = number(event.get("val_loss"))
            val_accuracy = 100.0 * number(event.get("val_accuracy"))
            if math.isnan(step) or (math.isnan(val_loss) and math.isnan(val_accuracy)):
                return False
            val = self.validation
            if len(val) and step <= val.last(VAL_STEP):
                val.truncate(int(np.searchsorted(val.column(VAL_STEP), step, side="left")))
            val.append((step, val_loss, val_accuracy))
            return True
        if kind == "run_started":
            start = number(event.get("start_step"))
            if not math.isnan(start) and len(self.steps) and self.steps.last(STEP) > start:
                self.truncate_after(start)
                return True
        return False

    def truncate_after(self, step: float) -> None:
        """Drop every point after ``step``."""
        self.steps.truncate(int(np.searchsorted(self.steps.column(STEP), step, side="right")))
        val = self.validation
        val.truncate(int(np.searchsorted(val.column(VAL_STEP), step, side="right")))
        self._recompute_ema()

    def set_smoothing(self, smoothing: float) -> None:
        self._loss_ema = Ema(smoothing)
        self._accuracy_ema = Ema(smoothing)
        self._recompute_ema()

    def _recompute_ema(self) -> None:
        """Rebuild the smoothed columns and leave the EMA state at the last point."""
        data = self.steps.data
        for raw, smoothed, state in ((LOSS, LOSS_EMA, self._loss_ema),
                                     (ACCURACY, ACCURACY_EMA, self._accuracy_ema)):
            state.reset()
            data[:, smoothed] = [state.update(v) for v in data[:, raw].tolist()]

    def summary(self) -> str:
        """The latest values, one line."""
        if not len(self.steps):
            return "No training steps yet"
        parts = [f"step {int(self.steps.last(STEP)):,}"]
        for label, col, fmt in (("smoothed loss", LOSS_EMA, "{:.4f}"), ("smoothed accuracy", ACCURACY_EMA, "{:.1f}%"),
                                ("learning rate", LR, "{:.3g}")):
            value = self.steps.last(col)
            if not math.isnan(value):
                parts.append(f"{label} {fmt.format(value)}")
        if len(self.validation):
            loss, acc = self.validation.last(VAL_LOSS), self.validation.last(VAL_ACCURACY)
            if not math.isnan(loss):
                parts.append(f"val loss {loss:.4f}")
            if not math.isnan(acc):
                parts.append(f"val accuracy {acc:.1f}%")
        return "  ·  ".join(parts)


class TrainingCharts(ChartPanel):
    """Loss and accuracy per step (raw thin line + EMA-smoothed line), validation points per
    epoch (plotted at their step), and the learning rate per step."""

    def __init__(self, parent: QWidget | None = None, smoothing: float = 0.9) -> None:
        super().__init__(parent)
        self._series = TrainingSeries(smoothing)
        self._overlay: TrainingSeries | None = None
        self._overlay_curves: list[tuple[pg.PlotItem, pg.PlotDataItem]] = []

        self._summary = QLabel()
        self._summary.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self._smoothing = QDoubleSpinBox()
        self._smoothing.setRange(0.0, 0.999)
        self._smoothing.setDecimals(3)
        self._smoothing.setSingleStep(0.05)
        self._smoothing.setValue(smoothing)
        self._smoothing.setToolTip("Weight of the history in the smoothed curves (0 = raw values)")
        self._smoothing.valueChanged.connect(self._on_smoothing_changed)
        header = QHBoxLayout()
        header.setContentsMargins(8, 4, 8, 0)
        header.addWidget(self._summary, 1)
        header.addWidget(QLabel("Smoothing"))
        header.addWidget(self._smoothing)

        self._graphics = pg.GraphicsLayoutWidget()
        self.loss_plot = make_plot("Loss", "step", "loss (cross-entropy)")
        self.accuracy_plot = make_plot("Accuracy", "step", "accuracy (%)", legend="bottom")
        self.lr_plot = make_plot("Learning rate", "step", "learning rate", legend=None,
                                 axis_items={"left": CompactAxis("left")})
        self._lr_top: float | None = None
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

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(header)
        self.input_bound = InputBoundLabel()  # shown when the replicas wait for data
        layout.addWidget(self.input_bound)
        layout.addWidget(self._graphics, 1)
        self._apply_palette()
        self._redraw()

    # --- public API -------------------------------------------------------------------
    def reset(self) -> None:
        self._series.clear()
        self.input_bound.reset()
        follow_data((self.loss_plot, self.accuracy_plot, self.lr_plot))
        self.flush()

    def add_events(self, events: list[dict]) -> None:
        """Buffer the step, epoch_end and run_started events; the redraw comes from a timer."""
        self.input_bound.add_events(events)
        span_run((self.loss_plot, self.accuracy_plot, self.lr_plot), events)
        if self._series.add_events(events):
            self.request_redraw()

    def set_overlay(self, events: list[dict] | None, label: str = "") -> None:
        """Draw a second run's smoothed curves, validation points and learning rate dashed on
        the same charts; ``None`` removes them."""
        for plot, curve in self._overlay_curves:
            plot.removeItem(curve)  # also removes its legend entry
        self._overlay_curves.clear()
        self._overlay = None
        if events is not None:
            self._overlay = TrainingSeries(self._series.smoothing)
            self._overlay.add_events(events)
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

    def point_count(self) -> int:
        """Number of step points buffered."""
        return len(self._series.steps)

    def set_smoothing(self, smoothing: float) -> None:
        self._smoothing.setValue(smoothing)

    # --- drawing ----------------------------------------------------------------------
    def _redraw(self) -> None:
        data = self._series.steps.data
        steps = data[:, STEP]
        for col, curve in self._curves.items():
            set_line_data(curve, steps, data[:, col])
        val = self._series.validation.data
        for col, curve in self._val_curves.items():
            keep = ~np.isnan(val[:, col])
            curve.setData(val[keep, VAL_STEP], val[keep, col])
        self._summary.setText(self._series.summary())
        if self._overlay is not None:
            self._draw_overlay()
        self._fit_learning_rate_axis()

    def _fit_learning_rate_axis(self) -> None:
        """0 to a bit above the largest rate; set only when that changes, so a zoom the user
        made stays until the schedule reaches a new maximum."""
        rates = [self._series.steps.column(LR)]
        if self._overlay is not None:
            rates.append(self._overlay.steps.column(LR))
        top = learning_rate_top(*rates)
        if top is None:
            self._lr_top = None
            self.lr_plot.enableAutoRange(axis="y")
        elif top != self._lr_top:
            self._lr_top = top
            self.lr_plot.setYRange(0.0, top, padding=0.0)  # also turns the y auto-range off

    def _draw_overlay(self) -> None:
        data, val = self._overlay.steps.data, self._overlay.validation.data
        columns = ((data, LOSS_EMA), (val, VAL_LOSS), (data, ACCURACY_EMA), (val, VAL_ACCURACY), (data, LR))
        for (_, curve), (source, col) in zip(self._overlay_curves, columns):
            keep = ~np.isnan(source[:, col]) if source is val else slice(None)
            curve.setData(source[keep, 0], source[keep, col])

    def _on_smoothing_changed(self, value: float) -> None:
        self._series.set_smoothing(value)
        if self._overlay is not None:
            self._overlay.set_smoothing(value)
        self.request_redraw()

    def _apply_palette(self) -> None:
        background, foreground = theme_colors(self)
        self._graphics.setBackground(background)
        for plot in (self.loss_plot, self.accuracy_plot, self.lr_plot):
            style_plot(plot, foreground, background)
