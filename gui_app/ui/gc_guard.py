"""Python's garbage collector runs on the GUI thread only, in small steps.

The collector starts whenever allocations pass its threshold, on whichever thread allocates
next. In the window that was once the run supervisor's worker thread (its slots ran Python;
background work now runs on threads that touch no Qt: gui_app/ui/workers/background.py), and
a cycle it collects may hold a widget (a closed dialog, a replaced chart) whose destructor Qt
must run on the GUI thread: destroyed on another thread it crashed or deadlocked (seen here:
the supervisor's thread stuck in ~QObject inside a collection, PySide6 6.11). So automatic
collection is off, and a timer on the GUI thread collects, generation by generation, when the
counts pass the thresholds -- the approach calibre takes for the same reason.

What made collections long (measured with ``gc.callbacks`` over the window's UI tests): full
collections of 150-370 ms that found nothing, rescanning everything alive, and generation-1
collections of 0.6-1.6 s freeing 24,000-48,000 objects -- closed windows, mostly the right-click
menus pyqtgraph builds for every plot without a parent, in cycles with it (charts/plot.py now
builds a view's menu on its first use). :func:`freeze_startup` moves what start-up built out of
the collector's sight, so full collections look only at what came later. The timer checks every
``INTERVAL_MS``, so a collection that is due waits at most that long.
"""
from __future__ import annotations

import gc

from PySide6.QtCore import QObject, QTimer

INTERVAL_MS = 100  # a check that finds nothing due costs microseconds


class GuiThreadCollector(QObject):
    def __init__(self, parent: QObject, interval_ms: int = INTERVAL_MS) -> None:
        super().__init__(parent)
        gc.disable()
        self._thresholds = gc.get_threshold()
        self._timer = QTimer(self, interval=interval_ms)
        self._timer.timeout.connect(self.check)
        self._timer.start()

    def stop(self) -> None:
        """Automatic collection back on (tests that leave the Qt part of a process)."""
        self._timer.stop()
        gc.enable()

    def check(self) -> None:
        """Collect the generations whose counts passed their thresholds, youngest first, as the
        interpreter would have (gen 2 only when gen 1 also passed its threshold)."""
        l0, l1, l2 = gc.get_count()
        t0, t1, t2 = self._thresholds
        if l0 > t0:
            gc.collect(0)
            if l1 > t1:
                gc.collect(1)
                if l2 > t2:
                    gc.collect(2)


_installed: GuiThreadCollector | None = None


def install(app: QObject) -> GuiThreadCollector:
    """Once per application (idempotent): automatic collection off, the GUI thread collects."""
    global _installed
    if _installed is None:
        _installed = GuiThreadCollector(app)
    return _installed


def freeze_startup() -> None:
    """Once the window is up: what exists now lives as long as the app, so no collection need
    look at it again (``gc.freeze``; a cycle of it that becomes garbage later is kept, which
    start-up's objects do not do)."""
    gc.freeze()


def uninstall() -> None:
    global _installed
    if _installed is not None:
        _installed.stop()
        _installed.deleteLater()
        _installed = None
