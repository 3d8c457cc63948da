"""CompareChart: the curves of compared runs over one another (gui_app/ui/dialogs/compare.py).

One colour for each row of the comparison: a run is its own line; runs that differ only in
their seed are their mean line over a min-max band (pyqtgraph's ``FillBetweenItem`` between
the per-step, or per-epoch, minimum and maximum: ``comparison.Row.band``). A combo picks the
curve (``comparison.CURVES``); the rows selected in the table are drawn thicker and on top.
"""
from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QVBoxLayout, QWidget

import numpy as np
import pyqtgraph as pg

from gui_app.core.comparison import Row
from gui_app.ui.charts.canvas import ChartCanvas
from gui_app.ui.charts.plot import ChartPanel, make_curve, make_plot, replica_color, style_plot, theme_colors

# comparison.CURVES: what the combo says, the x axis, the y axis
CURVE_TITLES = {"loss": ("Training loss by step", "step", "loss"),
                "accuracy": ("Training accuracy by step", "step", "accuracy"),
                "val_accuracy": ("Validation accuracy by epoch", "epoch", "accuracy"),
                "val_loss": ("Validation loss by epoch", "epoch", "loss")}
BAND_ALPHA = 50  # the band's fill: the lines of other rows stay readable through it
BAND_POINTS = 2000  # at most this many x values in a band (about a plot's width in pixels)
HIGHLIGHT_WIDTH = 3  # a selected row's line (a few lines: the 1-px rule of dense live curves can give here)


@dataclass
class RowCurve:
    """What one row of the comparison draws: its line (a group's mean) and a group's band."""

    line: pg.PlotDataItem
    band: pg.FillBetweenItem | None = None


class CompareChart(ChartPanel):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.curve_box = QComboBox()
        for key, (title, _, _) in CURVE_TITLES.items():
            self.curve_box.addItem(title, key)
        self.curve_box.setToolTip("The curve drawn for every run")
        self.curve_box.currentIndexChanged.connect(self.request_redraw)
        choose = QLabel("&Curve")
        choose.setBuddy(self.curve_box)
        header = QHBoxLayout()
        header.addWidget(choose)
        header.addWidget(self.curve_box)
        header.addStretch(1)
        self._graphics: ChartCanvas = ChartCanvas()  # narrows the base class's "set by the subclass"
        self._graphics.setFocusPolicy(Qt.FocusPolicy.NoFocus)  # the keyboard goes table, combo, buttons
        self.plot = make_plot("", "step", "loss")
        self._graphics.addItem(self.plot)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(header)
        layout.addWidget(self._graphics, 1)
        self._rows: list[Row] = []
        self._names: list[str] = []
        self._highlighted: set[int] = set()
        self.curves: list[RowCurve] = []  # one per row, in the comparison's order
        self._apply_palette()

    @property
    def curve(self) -> str:
        return self.curve_box.currentData()

    def set_curve(self, key: str) -> None:
        self.curve_box.setCurrentIndex(self.curve_box.findData(key))

    def show_rows(self, rows: list[Row], names: list[str]) -> None:
        """Draw these rows (``names``: their legend entries)."""
        self._rows, self._names = rows, names
        self._highlighted = set()
        self.request_redraw()

    def highlight(self, rows: set[int]) -> None:
        """Draw these rows (indices into the comparison's rows) thicker and on top."""
        self._highlighted = set(rows)
        for index, drawn in enumerate(self.curves):
            self._style(index, drawn)

    def _style(self, index: int, drawn: RowCurve) -> None:
        on = index in self._highlighted
        drawn.line.setPen(pg.mkPen(replica_color(index), width=HIGHLIGHT_WIDTH if on else 1))
        drawn.line.setZValue(2 if on else 1)

    def _redraw(self) -> None:
        key = self.curve
        _, x_label, y_label = CURVE_TITLES[key]
        self.plot.clear()
        self.plot.setLabel("bottom", x_label)
        self.plot.setLabel("left", y_label)
        self.curves = []
        symbol = "o" if x_label == "epoch" else None  # a few points an epoch: marked
        for index, (row, name) in enumerate(zip(self._rows, self._names)):
            color = replica_color(index)
            drawn = RowCurve(make_curve(self.plot, color, name, symbol=symbol))
            if len(row.runs) == 1:
                x, y = row.runs[0].curve(key)
            else:
                band = row.band(key)
                x, y = band.steps, band.mean
                fill = QColor(color)
                fill.setAlpha(BAND_ALPHA)
                steps, low, high = envelope(band.steps, band.low, band.high)
                drawn.band = pg.FillBetweenItem(pg.PlotCurveItem(steps, low), pg.PlotCurveItem(steps, high), brush=fill)
                self.plot.addItem(drawn.band)
            drawn.line.setData(x, y, connect="finite")  # a step without a value leaves a gap
            self._style(index, drawn)
            self.curves.append(drawn)
        self.plot.enableAutoRange()

    def _apply_palette(self) -> None:
        background, foreground = theme_colors(self)
        self._graphics.setBackground(background)
        style_plot(self.plot, foreground, background)


def envelope(x: np.ndarray, low: np.ndarray, high: np.ndarray,
             points: int = BAND_POINTS) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A band of at most ``points`` x values: each run of consecutive steps keeps its lowest low and
    highest high, so the band drawn covers every step's. FillBetweenItem builds its path in Python
    from every point: 2.7 s for a band of 100,000 steps, on the GUI thread."""
    if len(x) <= points:
        return x, low, high
    starts = np.arange(0, len(x), -(-len(x) // points))
    return x[starts], np.fmin.reduceat(low, starts), np.fmax.reduceat(high, starts)
