"""ChartCanvas: the widget every chart of the window draws in, with one rule for the mouse wheel.

pyqtgraph zooms a plot on every wheel event over it. On the Replicas tab, whose charts sit in a
scroll area, the wheel then zoomed the chart under the pointer instead of scrolling the page (and
the zoom stayed for later runs). The rule here, for every chart: **Ctrl+wheel zooms** (over a
plot: both axes; over an axis: that axis), the plain wheel goes on to the page around the chart,
which scrolls where it can. Dragging still pans, right-click has pyqtgraph's menu, the small "A"
button resets the view, and so does every new run or opened run (the charts' ``_history_replaced``).
The tooltip says so.
"""
from __future__ import annotations

import os

os.environ.setdefault("PYQTGRAPH_QT_LIB", "PySide6")

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtGui import QWheelEvent
from PySide6.QtWidgets import QAbstractScrollArea, QApplication, QWidget

import pyqtgraph as pg

ZOOM_TIP = ("Ctrl+wheel zooms (over an axis: that axis only), drag pans, right-click for more; "
            "the \"A\" button in the corner, a new run or another opened run shows everything again")


class _WheelToPage(QObject):
    """Gives a wheel event without Ctrl to the scroll area around the chart (the Replicas tab's
    page), which scrolls where it can; with none around, the event goes on to the chart's parents
    unaccepted, as any ignored wheel does. Sent to the page explicitly: Qt passes an ignored
    wheel event on to the parent only when it came from the system, not when the app sent it."""

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 (Qt override)
        if not isinstance(event, QWheelEvent) or event.modifiers() & Qt.KeyboardModifier.ControlModifier:
            return False
        canvas = self.parent()  # the chart this filter was made for
        page = _scroll_area_around(canvas if isinstance(canvas, QWidget) else None)
        if page is None:
            event.ignore()
        else:
            QApplication.sendEvent(page.viewport(), event)  # it scrolls by the wheel's turn, wherever it points
            event.accept()  # the page had it: not offered again on the way up
        return True


def _scroll_area_around(widget: QWidget | None) -> QAbstractScrollArea | None:
    parent = widget.parentWidget() if widget is not None else None
    while parent is not None and not isinstance(parent, QAbstractScrollArea):
        parent = parent.parentWidget()
    return parent


class ChartCanvas(pg.GraphicsLayoutWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._wheel_filter = _WheelToPage(self)
        self.viewport().installEventFilter(self._wheel_filter)  # the viewport receives the mouse
        self.setToolTip(ZOOM_TIP)
