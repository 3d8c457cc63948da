"""ShownRun: the run on screen, owned by the main window.

The contract: one object says which run the charts, the progress line and the Evaluation tab
show. It owns that run's :class:`~gui_app.core.history.RunHistory` and gives it to them, and they
draw from it (gui_app/ui/charts/run_view.py): the live run's batches are folded into it once
(:meth:`add_events`), a run opened from its folder is read into a new one. ``changed(str)`` is
emitted whenever the run on screen (or whether it has a trained model) changes, with the run
folder or ``""``; the window title, the Export menu and the Try tab follow it. ``note(str)``
carries a line for the Log tab (an evaluation that cannot be read or shown).
"""
from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject, Signal

from gui_app.core.events import Event
from gui_app.core.history import RunHistory
from gui_app.core.rundir import MODEL_FILE, read_history
from gui_app.ui.tabs.evaluation import EvaluationTab
from gui_app.ui.tabs.replicas import ReplicasTab
from gui_app.ui.tabs.training import TrainingTab
from gui_app.ui.window.run_progress import RunProgress


class ShownRun(QObject):
    changed = Signal(str)
    note = Signal(str)

    def __init__(self, training: TrainingTab, replicas: ReplicasTab, evaluation: EvaluationTab,
                 progress: RunProgress, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.training, self.replicas, self.evaluation, self.progress = training, replicas, evaluation, progress
        self._path: str | None = None
        evaluation.failed.connect(self.note)
        self._show(RunHistory())

    @property
    def path(self) -> str | None:
        """The run folder on screen (None: nothing, or a run whose engine has not said where yet)."""
        return self._path

    @property
    def history(self) -> RunHistory:
        return self._history

    def model_run(self) -> str | None:
        """The run on screen, when it has a trained model (the Export menu and the Try tab use it)."""
        run = self._path
        return run if run and (Path(run) / MODEL_FILE).is_file() else None

    def clear(self) -> None:
        """Empty charts, progress and evaluation: a new run starts, or none is shown."""
        self.training.set_overlay(None)
        self._show(RunHistory())
        self._set(None)

    def add_events(self, events: list[Event]) -> int:
        """Fold a batch of the live run's events; the views redraw what changed (its Part bits)."""
        return self._history.add(events)

    def set_path(self, run_dir: str | None) -> None:
        """The live run's folder (from its run_started event) or a resumed run's."""
        self._set(str(run_dir) if run_dir else None)

    def show_history(self, run_dir: str | Path) -> bool:
        """Show a run from its files: its events and its evaluation. True if it has one to show."""
        history = read_history(run_dir)
        self.training.set_overlay(None)
        self._show(history)
        for problem in history.problems:
            self.note.emit(problem)
        for chart in (self.training, self.replicas):
            chart.flush()
        self._set(str(run_dir))
        return self.has_evaluation()

    def has_evaluation(self) -> bool:
        """The Evaluation tab shows the run's evaluation."""
        return self.evaluation.has_evaluation()

    def model_may_have_changed(self) -> None:
        """The run on screen may have got its model.keras (a run completed): say so."""
        self.changed.emit(self._path or "")

    def _show(self, history: RunHistory) -> None:
        self._history = history
        for view in (self.training, self.replicas, self.evaluation, self.progress):
            view.set_history(history)

    def _set(self, path: str | None) -> None:
        self._path = path
        self.changed.emit(path or "")
