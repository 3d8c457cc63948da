"""ShownRun: draws the run on screen, and says which it is in the window's state.

The contract: it owns the run's :class:`~gui_app.core.history.RunHistory` and gives it to the
Training, Replicas and Evaluation tabs and the progress line, which draw from it
(gui_app/ui/charts/run_view.py): the live run's batches are folded into it once
(:meth:`add_events`), a run opened from its folder is read into a new one. Whenever another run
comes on screen (or none) it sets :attr:`WindowState.shown_run
<gui_app.ui.window.window_state.WindowState.shown_run>`, which the title, the Export menu and the
Try tab follow; the banner over the tabs (the run's diagnosis) draws from the same history.
``note(str)`` carries a line for the Log tab (a part of the run that cannot be read or shown).
"""
from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject, Signal

from gui_app.core.events import Event
from gui_app.core.history import RunHistory
from gui_app.core.rundir import read_history
from gui_app.core.ssh_hosts import split_run_key
from gui_app.ui.tabs.evaluation import EvaluationTab
from gui_app.ui.tabs.replicas import ReplicasTab
from gui_app.ui.tabs.training import TrainingTab
from gui_app.ui.window.finding_banner import FindingBanner
from gui_app.ui.window.run_progress import RunProgress
from gui_app.ui.window.window_state import WindowState


class ShownRun(QObject):
    note = Signal(str)

    def __init__(self, state: WindowState, training: TrainingTab, replicas: ReplicasTab, evaluation: EvaluationTab,
                 progress: RunProgress, parent: QObject | None = None, banner: FindingBanner | None = None) -> None:
        super().__init__(parent)
        self._state = state
        self.training, self.replicas, self.evaluation, self.progress = training, replicas, evaluation, progress
        self.banner = banner  # the run's diagnosis over the tabs (gui_app/ui/window/finding_banner.py)
        evaluation.failed.connect(self.note)
        self._show(RunHistory())

    @property
    def path(self) -> str | None:
        """The run folder on screen (None: nothing, or a run whose engine has not said where yet)."""
        return self._state.shown_run

    @property
    def history(self) -> RunHistory:
        return self._history

    def clear(self) -> None:
        """Empty charts, progress and evaluation: a new run starts, or none is shown."""
        self.training.set_overlay(None)
        self._show(RunHistory())
        self._state.set_shown_run(None)

    def add_events(self, events: list[Event]) -> int:
        """Fold a batch of the live run's events; the views redraw what changed (its Part bits)."""
        return self._history.add(events)

    def set_path(self, run_dir: str | None) -> None:
        """The live run's folder (from its run_started event) or a resumed run's."""
        self._state.set_shown_run(run_dir)

    def show_history(self, run_dir: str | Path, history: RunHistory | None = None) -> bool:
        """Show a run from its files: its events and its evaluation (``history``: read already).
        True if it has one to show."""
        history = history or read_history(run_dir)
        self.training.set_overlay(None)
        self._show(history)
        for problem in history.problems:
            self.note.emit(problem)
        self.draw_shown()
        # A host's run's folder is not here: a completed run has saved its model there.
        on_host = split_run_key(str(run_dir))[0] is not None
        self._state.set_shown_run(run_dir, history.status.status == "completed" if on_host else None)
        return self.has_evaluation()

    def draw_shown(self) -> None:
        """Draw now the charts on screen that wait for a redraw; a hidden tab draws when it is
        shown (the Replicas tab's first draw of 8 replicas made 16 curves an Open did not show),
        and a tab brought to the front draws before its first paint, not after it."""
        for chart in (self.training, self.replicas):
            if chart.isVisible():
                chart.flush_pending()

    def overlay(self, other_run: str | Path, history: RunHistory | None = None) -> None:
        """Draw another run's training curves over the run on screen, dashed (``history``: read already)."""
        self.training.set_overlay((history or read_history(other_run)).training, Path(other_run).name)
        self.say(f"{Path(self.path or '').name}, overlaid with {Path(other_run).name}")

    def say(self, text: str) -> None:
        """A line on the progress bar until the run's progress changes."""
        self.progress.set_message(text)

    def show_end(self, status: str, message: str) -> None:
        """The live run ended, as the supervisor says (a crashed engine wrote no run_finished)."""
        self.progress.show_end(status, message)

    def has_evaluation(self) -> bool:
        """The Evaluation tab shows the run's evaluation."""
        return self.evaluation.has_evaluation()

    def _show(self, history: RunHistory) -> None:
        self._history = history
        for view in (self.training, self.replicas, self.evaluation, self.progress, self.banner):
            if view is not None:
                view.set_history(history)
