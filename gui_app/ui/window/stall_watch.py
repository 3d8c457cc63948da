"""StallWatch: says when the live run on screen has stalled, while it happens.

A stall is known only by the clock: no event has come for much longer than the run's recent
steps took. Every :attr:`StallWatch.interval_ms` a QTimer on the GUI thread (no thread: nothing
here blocks) asks the shown run's history to apply ``diagnose``'s own rule
(gui_app/core/finding_rules.py ``stall``, through RunHistory.check_stall) to now and the process
that holds the run (its lock: gui_app/core/live_runs.py, read only once the run has been silent
for the shortest stall); the banner shows the finding, and the next step clears it. ``stalled``
carries a stall that has just appeared, for the desktop notification -- also a cluster's, which
comes as a ``stall`` event from its launcher (which sees every worker) and is not timed here.

Only a run this window follows, and only while it is the run on screen: a finished run cannot
stall, and an opened one is not watched.
"""
from __future__ import annotations

import time
from pathlib import Path

from PySide6.QtCore import QObject, QTimer, Signal

from gui_app.core.diagnosis import process_state
from gui_app.core.live_runs import live_process
from gui_app.ui.window.shown_run import ShownRun
from gui_app.ui.window.window_state import WindowState


class StallWatch(QObject):
    stalled = Signal(str, str)  # run_dir, the stall's sentence

    interval_ms = 1000  # how often the clock is read; tests shorten it

    def __init__(self, state: WindowState, shown: ShownRun, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._state, self._shown = state, shown
        self._told: object = None  # the cluster's stall finding last notified
        self._timer = QTimer(self, interval=self.interval_ms)
        self._timer.timeout.connect(self.check)
        state.active_run_changed.connect(self._follow)
        state.shown_run_changed.connect(self._follow)

    def is_watching(self) -> bool:
        return self._timer.isActive()

    def _live_on_screen(self) -> str | None:
        """The run this window follows when it is the one on screen, else None."""
        run, shown = self._state.active_run, self._state.shown_run
        return run if run and shown and Path(run) == Path(shown) else None

    def _follow(self, *_: object) -> None:
        if self._live_on_screen():
            if not self._timer.isActive():
                self._timer.start(self.interval_ms)
        else:
            self._timer.stop()

    def check(self) -> None:
        """One look at the clock: the stall finding appears, changes its figures or goes."""
        run_dir = self._live_on_screen()
        history = self._shown.history
        if run_dir is None:
            return
        told = history.findings.stall if history.findings.told_stall else None
        if told is not None:  # a cluster's launcher said it with its stall event: tell it once
            if told is not self._told:
                self._told = told
                self.stalled.emit(run_dir, told.message)
            return
        now = time.time()
        if history.findings.stall is None and history.findings.silent_for(now) < history.findings.floor():
            return  # too soon for any stall: the lock is not read
        was = history.findings.stall
        process = live_process(run_dir)
        history.check_stall(now, process.pid if process else None, lambda: process_state(process) if process else None)
        found = history.findings.stall
        if found is not None and was is None:
            self.stalled.emit(run_dir, found.message)
