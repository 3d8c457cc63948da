"""ShownRun: draws the run on screen, and says which it is in the window's state.

The contract: it owns the run's :class:`~gui_app.core.history.RunHistory` and gives it to the
Training, Replicas and Evaluation tabs and the progress line, which draw from it
(gui_app/ui/charts/run_view.py): the live run's batches are folded into it once
(:meth:`add_events`), a run opened from its folder is read into a new one. Whenever another run
comes on screen (or none) it sets :attr:`WindowState.shown_run
<gui_app.ui.window.window_state.WindowState.shown_run>`, which the title, the Export menu and the
Try tab follow; the banner over the tabs (the run's diagnosis) draws from the same history.
``note(str)`` carries a line for the Log tab (a part of the run that cannot be read or shown).

A long run whose pyramid must be built first (written by a version that kept none, or copied
here: rundir.history_to_build) is read by Open on a thread of its own (ui/workers/background.py:
seconds of decoding every line once, which froze the window), and comes on screen when read,
unless another run (or a live one) came first.
"""
from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject, Signal

from gui_app.core.events import Event
from gui_app.core.history import RunHistory
from gui_app.core.hosts import split_run_key
from gui_app.core.rundir import history_to_build, read_history
from gui_app.ui.tabs.evaluation import EvaluationTab
from gui_app.ui.tabs.replicas import ReplicasTab
from gui_app.ui.tabs.training import TrainingTab
from gui_app.ui.window.finding_banner import FindingBanner
from gui_app.ui.window.run_progress import RunProgress
from gui_app.ui.window.window_state import WindowState
from gui_app.ui.workers.background import Background, Send


class ShownRun(QObject):
    note = Signal(str)

    def __init__(self, state: WindowState, training: TrainingTab, replicas: ReplicasTab, evaluation: EvaluationTab,
                 progress: RunProgress, parent: QObject | None = None, banner: FindingBanner | None = None) -> None:
        super().__init__(parent)
        self._state = state
        self.training, self.replicas, self.evaluation, self.progress = training, replicas, evaluation, progress
        self.banner = banner  # the run's diagnosis over the tabs (gui_app/ui/window/finding_banner.py)
        evaluation.failed.connect(self.note)
        self._background = Background(self)
        self._reading: str | None = None  # the run Open reads off the GUI thread, to show once read
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
        self._reading = None
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
        self._reading = None
        history = history or read_history(run_dir)
        self.training.set_overlay(None)
        self._show(history)
        for problem in history.problems:
            self.note.emit(problem)
        for chart in (self.training, self.replicas):
            chart.flush()
        # A host's run's folder is not here: a completed run has saved its model there.
        on_host = split_run_key(str(run_dir))[0] is not None
        self._state.set_shown_run(run_dir, history.status.status == "completed" if on_host else None)
        return self.has_evaluation()

    def open(self, run_dir: str | Path) -> bool:
        """Show a past run (the progress line says which it is and how it ended, from its
        history). True if it has an evaluation to show; False too for a run read off the GUI
        thread (its pyramid is built first), which comes on screen once read."""
        if not history_to_build(run_dir):
            return self.show_history(run_dir)
        self.clear()
        self._reading = str(run_dir)
        self.say(f"Reading {Path(run_dir).name}: its history is built once from its events…")
        self._background.run(_read, self._reading, deliver=self._on_read, failed=self._on_read_failed,
                             name="open-run")
        return False

    def _on_read(self, read: tuple[str, RunHistory]) -> None:
        run_dir, history = read
        if run_dir == self._reading and self._state.is_idle():  # still the run asked for, and no live one
            self.show_history(run_dir, history)

    def _on_read_failed(self, exc: BaseException) -> None:
        if self._reading is not None:
            self.note.emit(f"Cannot read {self._reading}: {exc}")
            self.say("")
            self._reading = None

    def overlay(self, other_run: str | Path) -> None:
        """Draw another run's training curves over the run on screen, dashed."""
        self.training.set_overlay(read_history(other_run).training, Path(other_run).name)
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


def _read(send: Send, run_dir: str) -> None:
    """Open's read of a run whose pyramid is built first (on a background thread: no Qt here)."""
    send((run_dir, read_history(run_dir)))
