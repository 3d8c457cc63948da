"""The sweep view's four charts: the best metric so far against the trial number, parameter
importance (Optuna's, computed by ``sweep status``), the parallel coordinates (a line per trial
over one axis per parameter and the metric, coloured by the metric) and every trial's validation
curve, the best trial's highlighted. Redrawn through the chart throttle, like the run's tabs."""
from __future__ import annotations

import math

from PySide6.QtGui import QColor
from PySide6.QtWidgets import QVBoxLayout

import numpy as np
import pyqtgraph as pg

from gui_app.core.answers import SweepStatus
from gui_app.core.sweep_config import Parameter
from gui_app.core.wording import label
from gui_app.ui.charts.plot import (
    HIGHLIGHT_COLOR,
    TRAIN_COLOR,
    ChartPanel,
    IntegerAxis,
    make_curve,
    make_plot,
    style_plot,
    theme_colors,
)
from gui_app.ui.sweep.curves import Curve
from gui_app.ui.sweep.figures import METRICS, best_so_far, parallel_coordinates

TRIAL_ALPHA = 110  # the trials' curves under the best one
COLORMAP = pg.colormap.get("viridis")


class SweepCharts(ChartPanel):
    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self._graphics: pg.GraphicsLayoutWidget = pg.GraphicsLayoutWidget()  # narrows the base class's Optional
        # Trials and epochs are counted: integer ticks (not 0.5, 1.5, 2.5 with two trials).
        self.best_plot = make_plot("Best so far", "trial", "metric", legend="bottom",
                                   axis_items={"bottom": IntegerAxis("bottom")})
        self.importance_plot = make_plot("Parameter importance", "importance", "", legend=None)
        self.coords_plot = make_plot("Parallel coordinates", "", "low → high", legend=None)
        self.curves_plot = make_plot("Trials' validation curves", "epoch", "metric", legend=None,
                                     axis_items={"bottom": IntegerAxis("bottom")})
        self._graphics.addItem(self.best_plot, row=0, col=0)
        self._graphics.addItem(self.importance_plot, row=0, col=1)
        self._graphics.addItem(self.coords_plot, row=1, col=0)
        self._graphics.addItem(self.curves_plot, row=1, col=1)
        self.importance_plot.getAxis("left").setWidth(120)
        for plot in (self.best_plot, self.curves_plot):
            plot.getAxis("left").enableAutoSIPrefix(False)  # 0.95, not 950 (x0.001)
        self.axis_lines: list[pg.InfiniteLine] = []
        self.axis_names: list[pg.TextItem] = []  # over each axis: tick labels at the ends would be cut off
        self.coords_plot.hideAxis("bottom")
        self.best_points = make_curve(self.best_plot, TRAIN_COLOR, "trials", symbol="o")
        self.best_points.setPen(None)  # the trials as points, the best so far as the line
        self.best_line = make_curve(self.best_plot, HIGHLIGHT_COLOR, "best so far")
        self.note = pg.TextItem(anchor=(0.5, 0.5))
        self.note.setPos(0.5, 0)  # the middle of the chart's 0..1 by -0.5..0.5: at 0, its left half was cut off
        self.importance_plot.addItem(self.note)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self._graphics)
        self._status = SweepStatus("")
        self._parameters: tuple[Parameter, ...] = ()
        self._curves: dict[str, Curve] = {}
        self.coordinate_lines: list[pg.PlotDataItem] = []
        self.trial_curves: list[pg.PlotDataItem] = []
        self.importance_bars: pg.BarGraphItem | None = None
        self._apply_palette()

    def show_status(self, status: SweepStatus, parameters: tuple[Parameter, ...]) -> None:
        self._status, self._parameters = status, parameters
        self.request_redraw()

    def show_curves(self, curves: dict[str, Curve]) -> None:
        self._curves = curves
        self.request_redraw()

    # ---- drawing ------------------------------------------------------------------------------
    def _redraw(self) -> None:
        status = self._status
        metric = METRICS.get(status.metric, status.metric)
        for plot in (self.best_plot, self.curves_plot):
            plot.setLabel("left", metric)
        numbers, values, best = best_so_far(status.trials, status.direction)
        self.best_points.setData(numbers, values)
        self.best_line.setData(numbers, best)
        self._draw_importance(status.importance)
        self._draw_coordinates(status)
        self._draw_curves(status)

    def _draw_importance(self, importance: dict[str, float]) -> None:
        if self.importance_bars is not None:
            self.importance_plot.removeItem(self.importance_bars)
            self.importance_bars = None
        keys = list(importance)[::-1]  # the most important on top
        if keys:
            self.importance_bars = pg.BarGraphItem(x0=0, y=np.arange(len(keys)), height=0.6,
                                                   width=[importance[k] for k in keys], brush=TRAIN_COLOR)
            self.importance_plot.addItem(self.importance_bars)
        self.importance_plot.getAxis("left").setTicks([[(i, label(k)) for i, k in enumerate(keys)]])
        self.note.setText("" if keys else "Importance needs two completed trials")
        self.importance_plot.setXRange(0, 1)
        self.importance_plot.setYRange(-0.5, max(len(keys), 1) - 0.5)

    def _draw_coordinates(self, status: SweepStatus) -> None:
        for item in self.coordinate_lines:
            self.coords_plot.removeItem(item)
        coords = parallel_coordinates(status.trials, self._parameters, status.metric)
        low, high = coords.metric_range
        x = np.arange(len(coords.axes))
        self.coordinate_lines = []
        for line, value in zip(coords.lines, coords.metrics):
            share = (value - low) / (high - low) if high > low else 1.0
            if status.direction == "minimize":
                share = 1.0 - share  # the good end is always the bright one
            item = pg.PlotDataItem(x, np.array(line, dtype=float), pen=pg.mkPen(COLORMAP.map(share), width=1),
                                   connect="finite")
            self.coords_plot.addItem(item)
            self.coordinate_lines.append(item)
        names = [label(a) for a in coords.axes[:-1]] + [METRICS.get(status.metric, status.metric)]
        _, foreground = theme_colors(self)
        while len(self.axis_lines) < len(names):
            i = len(self.axis_lines)
            self.axis_lines.append(pg.InfiniteLine(i, angle=90, pen=pg.mkPen("#888888", width=1)))
            self.axis_names.append(pg.TextItem(anchor=(0.5, 0.0), color=foreground))
            self.axis_names[-1].setPos(i, 1.15)
            self.coords_plot.addItem(self.axis_lines[-1])
            self.coords_plot.addItem(self.axis_names[-1])
        for item, name in zip(self.axis_names, names):
            item.setText(name)
        self.coords_plot.setXRange(0, max(len(names) - 1, 1), padding=0.2)  # room for the end names
        self.coords_plot.setYRange(0, 1.15, padding=0)

    def _draw_curves(self, status: SweepStatus) -> None:
        for item in self.trial_curves:
            self.curves_plot.removeItem(item)
        self.trial_curves = []
        best_dir = status.best.run_dir if status.best else None
        column = "val_loss" if status.metric == "val_loss" else "val_accuracy"
        _, foreground = theme_colors(self)
        for run_dir, curve in sorted(self._curves.items(), key=lambda item: item[0] == best_dir):
            y = np.array([math.nan if v is None else v for v in getattr(curve, column)], dtype=float)
            best = run_dir == best_dir
            color = QColor(HIGHLIGHT_COLOR if best else foreground)
            color.setAlpha(255 if best else TRIAL_ALPHA)
            item = pg.PlotDataItem(np.array(curve.epochs, dtype=float), y, pen=pg.mkPen(color, width=2 if best else 1),
                                   connect="finite", symbol="o" if best else None, symbolSize=5,
                                   symbolBrush=color, symbolPen=None)
            self.curves_plot.addItem(item)
            self.trial_curves.append(item)

    def _apply_palette(self) -> None:
        background, foreground = theme_colors(self)
        self._graphics.setBackground(background)
        self.note.setColor(foreground)
        for item in self.axis_names:
            item.setColor(foreground)
        for plot in (self.best_plot, self.importance_plot, self.coords_plot, self.curves_plot):
            style_plot(plot, foreground, background)
        self.request_redraw()
