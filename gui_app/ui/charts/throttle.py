"""Throttled redraws: the one timer between a chart's buffers and its curves (docs/architecture.md,
"Process model": at most 30 ``setData`` calls a second, and only when something changed)."""
from __future__ import annotations

import time
from typing import Callable

from PySide6.QtCore import QObject, QTimer

REDRAW_INTERVAL_MS = 33  # <= 30 redraws per second


class RedrawThrottle(QObject):
    """Calls ``redraw`` once after ``request``, at most every ``REDRAW_INTERVAL_MS``.

    When a redraw gets expensive (very long runs, software rendering) the interval grows to
    three times its measured cost (capped at 1 s), so ``setData`` never takes more than a
    third of the GUI thread, whatever the event rate.
    """

    def __init__(self, redraw: Callable[[], None], parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._redraw = redraw
        self._dirty = False
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(REDRAW_INTERVAL_MS)
        self._timer.timeout.connect(self._on_timeout)

    def request(self) -> None:
        self._dirty = True
        if not self._timer.isActive():
            self._timer.start()

    def cancel(self) -> None:
        self._timer.stop()
        self._dirty = False

    def _on_timeout(self) -> None:
        if self._dirty:
            self._dirty = False
            started = time.perf_counter()
            self._redraw()
            cost_ms = 1000.0 * (time.perf_counter() - started)
            self._timer.setInterval(max(REDRAW_INTERVAL_MS, min(1000, int(3 * cost_ms))))
