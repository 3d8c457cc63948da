"""RunProgress: a progress bar and one line saying where the run on screen stands, in every
state: the engine starting (TensorFlow loading, a cluster forming), the first steps compiling,
training (epoch, step, examples/s, time left), paused, stopping, and how it ended (completed with
its test accuracy; stopped, interrupted or failed at which step, and why). With no run on screen
it says what to do: train, or open one of the runs listed.

It draws from the run history's ``progress`` and ``status`` (gui_app.core.history.status) and
follows the window's state (the run state, the runs listed); the live run's end, as the
supervisor tells it, comes from RunActions (:meth:`RunProgress.show_end`): an engine that crashed
wrote no ``run_finished``, so the history alone would call it interrupted. A run that did not
complete never shows 100 %: the bar stays at the step it reached and says so.
"""
from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import QHBoxLayout, QProgressBar, QWidget

from gui_app.core.events import Eval, Progress
from gui_app.core.history import Part, RunHistory
from gui_app.ui.charts.run_view import RunView
from gui_app.ui.labels import ElidedLabel
from gui_app.ui.window.window_state import PAUSED, STARTING, STOPPING, WindowState

NO_RUN = "No run yet: set up on the left and press Train (Ctrl+R)"
PICK_A_RUN = "Select a run in the list below to open it, or set up on the left and press Train (Ctrl+R)"
STARTING_TEXT = "Starting the engine: TensorFlow loads in a few seconds…"


def format_duration(seconds: float) -> str:
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{seconds:02d}" if hours else f"{minutes}:{seconds:02d}"


def reached(history: RunHistory) -> tuple[int, int]:
    """The step a run reached and the steps it planned (0: not known)."""
    progress, status = history.progress, history.status
    return max(progress.step, status.step), progress.total_steps or status.total_steps or 0


def describe_end(status: str, message: str, history: RunHistory) -> str:
    """How a run ended, in one line: "Failed at step 12 of 200: <why>", "Stopped at step 12 of
    200", "Completed 200 steps" (the run history says which step it reached)."""
    step, total = reached(history)
    where = f"at step {step:,} of {total:,}" if total else f"at step {step:,}"
    if status == "completed":
        text = f"Completed {step:,} steps" if step else "Completed"
    elif status == "failed" and step == 0:
        text = "Failed before its first step"
    else:
        text = f"{status.capitalize()} {where}"
    return text + (f": {message}" if message else "")


class RunProgress(QWidget, RunView):
    def __init__(self, state: WindowState, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._state = state
        self._message = ""  # said by the window until the run's progress changes (see set_message)
        self._end: tuple[str, str] | None = None  # the live run's (status, message) once it ended
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self.bar = QProgressBar()
        self.bar.setMinimumWidth(140)
        layout.addWidget(self.bar, 2)
        self.label = ElidedLabel()  # long messages (a failure's) are cut here, whole in the tooltip
        layout.addWidget(self.label, 3)
        state.run_state_changed.connect(self._redraw)
        state.listed_runs_changed.connect(self._redraw)
        self.set_history(RunHistory())

    def set_message(self, text: str) -> None:
        """Say something else until the run's progress changes (which runs are overlaid)."""
        self._message = text
        self.label.setText(text)

    def show_end(self, status: str, message: str) -> None:
        """The live run has ended: ``status`` and ``message`` as the supervisor said them."""
        self._end = (status, message)
        self._redraw()

    def _history_replaced(self) -> None:
        self._end, self._message = None, ""

    def _history_changed(self, changed: int) -> None:
        if changed & Part.PROGRESS:
            self._message = ""
            self._redraw()

    # ---- drawing --------------------------------------------------------------------------------
    def _redraw(self, *_: object) -> None:
        history, run_state = self.history, self._state.run_state
        progress, status = history.progress, history.status
        ended = self._end or (None if not self._state.is_idle() or status.status == "new"
                              else (status.status, status.message or ""))
        if ended is not None:
            self._show_end(*ended)
        elif progress.latest == "stage" and progress.stage is not None:  # a "stage" event set it
            self._show_stage(progress.stage)
        elif not progress.latest:
            self._show_nothing(run_state)
        else:
            self._set_bar(progress.step, progress.total_steps)
            if progress.latest == "started":
                self.label.setText("Compiling the first steps…")
            elif progress.latest == "evaluated" and history.evaluation is not None:  # the event set it
                self.label.setText(self._accuracy_text(history.evaluation))
            else:
                self.label.setText(self._step_text(run_state))
        if self._message:
            self.label.setText(self._message)

    def _show_nothing(self, run_state: str) -> None:
        if run_state == STARTING:
            self.bar.setRange(0, 0)  # busy: nothing to count yet
            self.label.setText(STARTING_TEXT)
            return
        self._set_bar(0, 1)
        self.label.setText(PICK_A_RUN if self._state.listed_runs else NO_RUN)

    def _step_text(self, run_state: str) -> str:
        progress = self.history.progress
        parts = [f"Epoch {progress.epoch}/{progress.epochs}", f"step {progress.step:,}/{progress.total_steps:,}"]
        if run_state == PAUSED:
            return "Paused at " + " · ".join(parts).lower() + ": Continue (Ctrl+P) goes on"
        if run_state == STOPPING:
            return "Stopping at " + " · ".join(parts).lower() + ": writing a checkpoint…"
        if progress.examples_per_sec is not None:
            parts.append(f"{progress.examples_per_sec:,.0f} examples/s")
        eta = progress.eta_seconds()
        if eta is not None:
            parts.append(f"ETA {format_duration(eta)}")
        return " · ".join(parts)

    @staticmethod
    def _accuracy_text(evaluation: Eval) -> str:
        accuracy = "n/a" if evaluation.accuracy is None else f"{evaluation.accuracy:.2%}"
        return f"Test accuracy {accuracy} on {evaluation.examples:,} examples"

    def _show_end(self, status: str, message: str) -> None:
        history = self.history
        step, total = reached(history)
        if status == "completed":
            self._set_bar(total or 1, total or 1)
            evaluation = history.evaluation
            text = self._accuracy_text(evaluation) if evaluation is not None else describe_end(status, "", history)
        else:  # never 100 %: the bar stays at the step reached and names the end
            self._set_bar(min(step, max(total - 1, 0)), max(total, 1), f"{status} at step {step:,}" if step else status)
            text = describe_end(status, message, history)
        opened = history.run_dir if self._end is None else None
        self.label.setText(f"{Path(opened).name}: {text[0].lower()}{text[1:]}" if opened else text)

    def _show_stage(self, stage: Progress) -> None:
        what = stage.what or stage.stage or "preparing"
        share = stage.share()
        if share is not None:
            self._set_bar(int(1000 * share), 1000)
            self.label.setText(f"{stage.stage.capitalize()} {what}: {share:.0%}")
        else:
            self.bar.setRange(0, 0)  # busy indicator: the size is unknown
            self.label.setText(f"{stage.stage.capitalize()} {what}…")

    def _set_bar(self, value: int, maximum: int, text: str = "%p%") -> None:
        self.bar.setRange(0, max(1, maximum))
        self.bar.setValue(min(value, self.bar.maximum()))
        self.bar.setFormat(text)
