"""ZoomDetail: the full resolution of the steps in view, for a long run opened from its pyramid.

A long run opens as each bucket's min and max over the whole run (gui_app/core/history/coarse.py):
enough for the whole run at once, too coarse for a few thousand steps. When the user zooms or
pans, the steps in view are read again at the finest resolution there is (rundir.read_detail:
each step from the events for a short range, finer buckets for a longer one) on the background
helper, never on the GUI thread; the chart then draws them in place of the coarse points of
that range (:meth:`ZoomDetail.splice`). A newer zoom, or another run, makes an older read moot.
"""
from __future__ import annotations

import math
from typing import Callable

from PySide6.QtCore import QObject, QTimer

import numpy as np
import pyqtgraph as pg

from gui_app.core.history import RunHistory
from gui_app.core.history.buffers import GrowableArray
from gui_app.core.history.training import STEP
from gui_app.core.rundir import read_detail
from gui_app.ui.workers.background import Background, Send

SETTLE_MS = 150  # a wheel zoom is many range changes: read once it settles


def _read(send: Send, run_dir: str, first: int, last: int) -> None:
    send((first, last, read_detail(run_dir, first, last)))


class ZoomDetail(QObject):
    """Reads the steps in view of ``plot`` when the history on screen is coarse; calls
    ``on_ready()`` (on the GUI thread) when they came. ``detail``: (first, last, RunHistory)."""

    def __init__(self, plot: pg.PlotItem, on_ready: Callable[[], None], parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._view = plot.getViewBox()
        self._on_ready = on_ready
        self._background = Background(self)
        self._timer = QTimer(self, singleShot=True, interval=SETTLE_MS)
        self._timer.timeout.connect(self._fetch)
        self._view.sigXRangeChanged.connect(self._on_range_changed)
        self._run_dir: str | None = None
        self._steps: GrowableArray | None = None  # the history's steps (its first and last)
        self._generation = 0
        self.detail: tuple[int, int, RunHistory] | None = None

    def reset(self, history: RunHistory) -> None:
        """Another run on screen (or the same one read again): forget the detail read."""
        self._generation += 1
        self.detail = None
        self._run_dir = history.run_dir if history.coarse else None
        self._steps = history.training.steps
        self._timer.stop()

    def busy(self) -> bool:
        return self._timer.isActive() or self._background.busy()

    def splice(self, data: np.ndarray, detail: np.ndarray, step_column: int = 0) -> np.ndarray:
        """``data``'s rows outside the detail's range, and the detail's rows in it, in step order."""
        if self.detail is None:
            return data
        first, last, _ = self.detail
        steps = data[:, step_column]
        before = int(np.searchsorted(steps, first, side="left"))
        after = int(np.searchsorted(steps, last, side="right"))
        return np.concatenate([data[:before], detail, data[after:]])

    def _on_range_changed(self, *_) -> None:
        if self._run_dir is not None and not self._view.state["autoRange"][0]:
            self._timer.start()

    def _fetch(self) -> None:
        if self._run_dir is None:
            return
        lo, hi = self._view.viewRange()[0]
        first, last = max(int(math.floor(lo)), 0), max(int(math.ceil(hi)), 0)
        if self.detail is not None and self.detail[:2] == (first, last):
            return
        steps = self._steps.column(STEP) if self._steps is not None else None
        if steps is not None and len(steps) and first <= steps[0] and last >= steps[-1]:
            # The whole run in view: what the history holds already (an Open's own range, as it
            # spans the run's planned steps, read a second time the whole pyramid).
            if self.detail is not None:
                self.detail = None
                self._on_ready()
            return
        generation = self._generation
        self._background.run(_read, self._run_dir, first, last, name="ZoomDetail",
                             deliver=lambda value: self._take(generation, value))

    def _take(self, generation: int, value: tuple[int, int, RunHistory | None]) -> None:
        first, last, history = value
        if generation != self._generation or history is None:
            return  # another run came on screen since
        self.detail = (first, last, history)
        self._on_ready()
