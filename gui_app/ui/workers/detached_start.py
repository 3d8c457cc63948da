"""DetachedStart: the short job that starts a run on its own (``train --detach``, ``resume
--detach``, ``sweep --detach``), whose answer is the one line it prints: the run's (or the sweep's)
directory, or the run's own error line (docs/detached.md)."""
from __future__ import annotations

from typing import Sequence

from PySide6.QtCore import QObject

from gui_app.ui.workers.engine_job import EngineJob
from gui_app.ui.workers.process import STRAY_PREFIX


class DetachedStart(EngineJob):
    """``train --detach`` or ``resume --detach``: its answer is the one line it prints, the run directory."""

    def __init__(self, command: Sequence[str], parent: QObject | None = None) -> None:
        super().__init__(command, name="the engine", parent=parent)
        self._process.text_answers = True  # the run directory is the answer, not a line of the run's log
        self._process.text_line.connect(self._take_text)

    def _take_text(self, text: str) -> None:
        if self._answer is None:
            self._take_answer(text)
        else:  # only the first line answers: anything after it is a stray, for the Log tab
            self.log_line.emit(f"{STRAY_PREFIX}{text}")

    def _on_start_failed(self, message: str) -> None:
        super()._on_start_failed(f"cannot start {self.name}: {message}")
