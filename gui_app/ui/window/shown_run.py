"""ShownRun: the run on screen, owned by the main window.

The contract: one object says which run the charts, the progress line and the Evaluation tab
show, and it alone fills and clears them. ``changed(str)`` is emitted whenever that run (or
whether it has a trained model) changes, with the run folder or ``""``; the window title,
the Export menu and the Try tab follow it. ``note(str)`` carries a line for the Log tab (an
evaluation file that cannot be read).
"""
from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject, Signal

from gui_app.core.rundir import MODEL_FILE, read_events
from gui_app.ui.tabs.evaluation import EvaluationView
from gui_app.ui.tabs.replicas import ReplicaCharts
from gui_app.ui.tabs.training import TrainingCharts
from gui_app.ui.window.run_progress import RunProgress


class ShownRun(QObject):
    changed = Signal(str)
    note = Signal(str)

    def __init__(self, training: TrainingCharts, replicas: ReplicaCharts, evaluation: EvaluationView,
                 progress: RunProgress, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.training, self.replicas, self.evaluation, self.progress = training, replicas, evaluation, progress
        self._path: str | None = None

    @property
    def path(self) -> str | None:
        """The run folder on screen (None: nothing, or a run whose engine has not said where yet)."""
        return self._path

    def model_run(self) -> str | None:
        """The run on screen, when it has a trained model (the Export menu and the Try tab use it)."""
        run = self._path
        return run if run and (Path(run) / MODEL_FILE).is_file() else None

    def clear(self) -> None:
        """Empty charts, progress and evaluation: a new run starts, or none is shown."""
        for widget in (self.training, self.replicas, self.progress):
            widget.reset()
        self.training.set_overlay(None)
        self.evaluation.clear()
        self._set(None)

    def add_events(self, events: list[dict]) -> None:
        self.training.add_events(events)
        self.replicas.add_events(events)
        self.progress.add_events(events)

    def set_path(self, run_dir: str | None) -> None:
        """The live run's folder (from its run_started event) or a resumed run's."""
        self._set(str(run_dir) if run_dir else None)

    def show_history(self, run_dir: str | Path) -> bool:
        """Show a run from its files: every event, then its evaluation. True if it has one."""
        self.clear()
        self.add_events(list(read_events(run_dir)))
        for chart in (self.training, self.replicas):
            chart.flush()
        has_eval = self.show_evaluation(str(run_dir))
        self._set(str(run_dir))
        return has_eval

    def show_evaluation(self, run_dir: str) -> bool:
        try:
            return self.evaluation.show_run(run_dir)
        except ValueError as exc:
            self.note.emit(str(exc))
            return False

    def model_may_have_changed(self) -> None:
        """The run on screen may have got its model.keras (a run completed): say so."""
        self.changed.emit(self._path or "")

    def _set(self, path: str | None) -> None:
        self._path = path
        self.changed.emit(path or "")
