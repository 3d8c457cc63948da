"""StepSplitPanel (Replicas tab): where each step's time goes -- per replica, its own forward
and backward pass, the wait for input, and the rest of the step (waiting for the slower
replicas, the all-reduce, the optimizer) -- as a stacked bar per replica over the last steps
and a line of the three shares over the run, with the bottleneck named when one part
dominates. One legend above both charts names the three colours (a legend inside the share chart
covered its lines, and the bars had none). The numbers are the run history's ``timing`` (gui_app.core.history.timing).
"""
from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QSizePolicy, QVBoxLayout, QWidget

import numpy as np
import pyqtgraph as pg

from gui_app.core.history import Part
from gui_app.core.history.timing import WINDOW
from gui_app.core.wording import reduction
from gui_app.ui.charts.canvas import ChartCanvas
from gui_app.ui.charts.plot import (
    ChartPanel,
    follow_data,
    make_curve,
    make_plot,
    replica_color,
    set_line_data,
    style_plot,
    theme_colors,
)
from gui_app.ui.charts.run_view import RunView

COMPUTE_COLOR, INPUT_COLOR, REST_COLOR = "#4e79a7", "#bab0ac", "#edc948"
PARTS = ("compute", "input", "all-reduce, optimizer, waiting")
LEGEND = ("compute (a bar: its replica's colour)", "input", "all-reduce, optimizer, waiting")


class StepSplitPanel(ChartPanel, RunView):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.label = QLabel(wordWrap=True)
        self.label.setContentsMargins(8, 0, 8, 0)
        self._graphics: ChartCanvas = ChartCanvas()  # narrows the base class's "set by the subclass"
        self._graphics.setFixedHeight(224)  # the loss, gradient and speed charts keep the room
        self.bars_plot = make_plot(f"Each replica's step (mean of the last {WINDOW} steps)", "replica", "time",
                                   y_units="s", legend=None)
        self.share_plot = make_plot("Share of each step", "step", "share of the step", legend=None)
        self.share_plot.setYRange(0, 1, padding=0.02)
        self._bars = [pg.BarGraphItem(x=[], height=[], width=0.6) for _ in PARTS]
        for bars in self._bars:
            self.bars_plot.addItem(bars)
        self._lines = [make_curve(self.share_plot, color, name) for color, name in
                       zip((COMPUTE_COLOR, INPUT_COLOR, REST_COLOR), PARTS)]
        # A row of its own over both charts, a swatch per part (the bars' colours, the lines' too).
        self.legend = pg.LegendItem(labelTextSize="8pt", colCount=len(PARTS), horSpacing=16, frame=False)
        self._swatches = [pg.BarGraphItem(x=[0], height=[1], width=1, brush=color, pen=pg.mkPen(color))
                          for color in (COMPUTE_COLOR, INPUT_COLOR, REST_COLOR)]
        for swatch, name in zip(self._swatches, LEGEND):
            self.legend.addItem(swatch, name)
        self._graphics.addItem(self.legend, row=0, col=0, colspan=2)
        # Its own width, centred (stretched over the row, its swatches stood far from their names).
        self.legend.setSizePolicy(QSizePolicy.Policy.Fixed, QSizePolicy.Policy.Fixed)
        self._graphics.ci.layout.setAlignment(self.legend, Qt.AlignmentFlag.AlignHCenter)
        self._graphics.addItem(self.bars_plot, row=1, col=0)
        self._graphics.addItem(self.share_plot, row=1, col=1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.label)
        layout.addWidget(self._graphics)
        self._apply_palette()
        self.setVisible(False)  # until a run reports step timings

    def _history_replaced(self) -> None:
        follow_data((self.bars_plot, self.share_plot))  # a zoom of the last run goes
        self.share_plot.setYRange(0, 1, padding=0.02)

    def _history_changed(self, changed: int) -> None:
        if not changed & Part.TIMING:
            return
        split = self.history.timing
        self.setVisible(bool(split.steps()))  # shown once a run reports step timings
        if split.steps():
            compute, waited, rest = split.shares() or (0.0, 0.0, 0.0)
            joined = reduction(split.strategy)
            text = (f"Where each step's time goes (last {split.steps()} steps): compute {compute:.0%} · "
                    f"input {waited:.0%} · {joined} and optimizer {rest:.0%}")
            advice = split.advice()
            self.label.setText(text + (f". <b>{advice[0].upper() + advice[1:]}</b>." if advice else ""))
        self.request_redraw()

    def _redraw(self) -> None:
        split = self.history.timing
        rows = split.per_replica()
        x = np.arange(len(rows))
        base = np.zeros(len(rows))
        colours = [[replica_color(r) for r in range(len(rows))], [pg.mkColor(INPUT_COLOR)] * len(rows),
                   [pg.mkColor(REST_COLOR)] * len(rows)]
        for i, bars in enumerate(self._bars):
            if len(rows):
                bars.setOpts(x=x, y0=base.copy(), height=rows[:, i], brushes=colours[i],
                             pens=[pg.mkPen(c.darker(130)) for c in colours[i]])
                base += rows[:, i]
            else:  # pyqtgraph 0.14 fails on empty pen lists
                bars.setOpts(x=[], y0=None, height=[], pens=None, brushes=None)
        self.bars_plot.getAxis("bottom").setTicks([[(r, str(r)) for r in range(len(rows))]])
        data = split.history.data
        for i, line in enumerate(self._lines):
            set_line_data(line, data[:, 0], data[:, i + 1])

    def _apply_palette(self) -> None:
        background, foreground = theme_colors(self)
        self._graphics.setBackground(background)
        for plot in (self.bars_plot, self.share_plot):
            style_plot(plot, foreground, background)
        self.legend.setLabelTextColor(foreground)
        for _, label in self.legend.items:
            label.setText(label.text)  # setAttr alone does not re-render existing labels
