"""Throttled redraws: the one timer between a chart's buffers and its curves (docs/architecture.md,
"Process model": at most 30 ``setData`` calls a second, and only when something changed)."""
from __future__ import annotations

import time
from typing import Callable

from PySide6.QtCore import QObject, QTimer

REDRAW_INTERVAL_MS = 33  # <= 30 redraws per second


class RedrawThrottle(QObject):
    """Calls ``redraw`` once after ``request``, at most every ``REDRAW_INTERVAL_MS``: at once
    (on the next turn of the event loop) when the last redraw is that long ago, else when the
    interval since it is over -- a step reaches an idle chart without waiting out an interval.

    When a redraw gets expensive (very long runs, software rendering) the interval grows to
    three times its measured cost (capped at 1 s), so ``setData`` never takes more than a
    third of the GUI thread, whatever the event rate.
    """

    def __init__(self, redraw: Callable[[], None], parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._redraw = redraw
        self._dirty = False
        self._interval_ms = REDRAW_INTERVAL_MS
        self._last = -float("inf")  # perf_counter() of the last redraw
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.timeout.connect(self._on_timeout)

    def request(self) -> None:
        self._dirty = True
        if not self._timer.isActive():
            since_ms = 1000.0 * (time.perf_counter() - self._last)
            self._timer.start(int(max(0.0, self._interval_ms - since_ms)))

    def pending(self) -> bool:
        """A redraw was asked for and has not run yet."""
        return self._dirty

    def cancel(self) -> None:
        self._timer.stop()
        self._dirty = False

    def _on_timeout(self) -> None:
        if self._dirty:
            self._dirty = False
            started = time.perf_counter()
            self._redraw()
            self._last = time.perf_counter()
            cost_ms = 1000.0 * (self._last - started)
            self._interval_ms = max(REDRAW_INTERVAL_MS, min(1000, int(3 * cost_ms)))
