"""RehearsalChart: a rehearsal's two runs overlaid (gui_app/ui/dialogs/rehearse.py), the compare
chart (gui_app/ui/charts/compare_chart.py) with the rehearsal's steps marked.

    chart.show_runs(reference, rehearsed, certificate)   # RunFigures read off the GUI thread

One line per run -- the reference (straight through) and the rehearsed run (interrupted, then
resumed in the same folder: its repeated steps are the resume's, ``comparison.read_figures``
keeps the last of each) -- over the per-step curves only: the marks are steps, so the per-epoch
validation curves, whose x is the epoch, are left out of the combo. Vertical lines mark where
the interrupted run stopped (``interrupted_at``), where its resume started (``resumed_from``)
and, when the runs are not equivalent, the first step that differs (a difference in the final
state, step 0, has no step to mark). An equivalent rehearsal draws the second line exactly over
the first: that is the proof, so the rehearsed run is dashed and the reference shows through.
"""
from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QWidget

import pyqtgraph as pg

from gui_app.core.answers import Certificate
from gui_app.core.comparison import CURVES, Row, RunFigures
from gui_app.ui.charts.compare_chart import CompareChart, RowCurve
from gui_app.ui.charts.plot import HIGHLIGHT_COLOR, replica_color

NAMES = ("reference (straight through)", "rehearsed (interrupted, resumed)")
STOP_COLOR = "#888888"  # the interruption's marks: grey, the difference's red stands out


class RehearsalChart(CompareChart):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        for index in reversed(range(self.curve_box.count())):
            if CURVES[self.curve_box.itemData(index)] != "steps":
                self.curve_box.removeItem(index)
        self.certificate: Certificate | None = None
        self.marks: dict[str, pg.InfiniteLine] = {}  # "stopped", "resumed", "differs": the lines drawn

    def show_runs(self, reference: RunFigures, rehearsed: RunFigures, certificate: Certificate) -> None:
        self.certificate = certificate
        self.show_rows([Row({}, [reference]), Row({}, [rehearsed])], list(NAMES))

    def clear_runs(self) -> None:
        self.certificate = None
        self.show_rows([], [])

    def _redraw(self) -> None:
        super()._redraw()  # clears the plot, marks included
        self.marks = {}
        cert = self.certificate
        if cert is None or not self.curves:
            return
        if cert.interrupted_at is not None:
            self._mark("stopped", cert.interrupted_at, f"stopped after {cert.interrupted_at}", STOP_COLOR, 0.95)
        if cert.resumed_from is not None and cert.resumed_from != cert.interrupted_at:
            self._mark("resumed", cert.resumed_from, f"resumed from {cert.resumed_from}", STOP_COLOR, 0.85)
        first = cert.first_difference
        if not cert.equivalent and first is not None and first.step > 0:
            self._mark("differs", first.step, f"differs at {first.step}", HIGHLIGHT_COLOR, 0.75)

    def _style(self, index: int, drawn: RowCurve) -> None:
        super()._style(index, drawn)
        if index == 1:
            drawn.line.setPen(pg.mkPen(replica_color(1), width=2, style=Qt.PenStyle.DashLine))

    def _mark(self, key: str, step: int, text: str, color: str, height: float) -> None:
        line = pg.InfiniteLine(step, angle=90, movable=False,
                               pen=pg.mkPen(color, width=1 if key != "differs" else 2, style=Qt.PenStyle.DashLine),
                               label=text, labelOpts={"position": height, "color": color})
        self.plot.addItem(line, ignoreBounds=True)
        self.marks[key] = line
