"""A stand-in for the RunSupervisor where a test drives the window's state without an engine: the
supervisor's signals and ``state()``, and what a run does to them."""
from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject, Signal

from gui_app.core.events import RunStarted


class StubRun(QObject):
    run_started = Signal(object)
    finished = Signal(str, str, str)
    state_changed = Signal(str)

    def __init__(self) -> None:
        super().__init__()
        self._state = "idle"

    def state(self) -> str:
        return self._state

    def set_state(self, state: str) -> None:
        self._state = state
        self.state_changed.emit(state)

    def start(self, run_dir: str | Path) -> None:
        """A run starts in ``run_dir`` (as the supervisor says it: running, then run_started)."""
        self.set_state("running")
        self.run_started.emit(RunStarted(run_dir=str(run_dir), config={}))

    def end(self, status: str, run_dir: str | Path, message: str = "") -> None:
        self.set_state("idle")
        self.finished.emit(status, str(run_dir), message)
