"""RunProgress: a progress bar and one line of epoch, step, examples/s and time left, drawn from
the run history's ``progress`` (gui_app.core.history.status.StepProgress)."""
from __future__ import annotations

from PySide6.QtWidgets import QHBoxLayout, QLabel, QProgressBar, QWidget

from gui_app.core.history import Part, RunHistory
from gui_app.ui.charts.run_view import RunView

NO_RUN = "No run yet: set up on the left and press Train (Ctrl+R)"


def format_duration(seconds: float) -> str:
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{seconds:02d}" if hours else f"{minutes}:{seconds:02d}"


class RunProgress(QWidget, RunView):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self.bar = QProgressBar()
        self.bar.setMinimumWidth(220)
        self.bar.setFormat("%p%")
        layout.addWidget(self.bar, 2)
        self.label = QLabel()
        self.label.setMinimumWidth(360)
        layout.addWidget(self.label, 3)
        self.set_history(RunHistory())

    def set_message(self, text: str) -> None:
        """Say something else until the run's progress changes (why it ended, which run is open)."""
        self.label.setText(text)

    def _history_changed(self, changed: int) -> None:
        if not changed & Part.PROGRESS:
            return
        progress = self.history.progress
        if progress.latest == "stage":
            self._show_stage()
            return
        if not progress.latest:
            self.bar.setRange(0, 1)
            self.bar.setValue(0)
            self.label.setText(NO_RUN)
            return
        self.bar.setRange(0, max(1, progress.total_steps))
        self.bar.setValue(min(progress.step, self.bar.maximum()))
        if progress.latest == "started":
            self.label.setText("Compiling the first steps…")
        elif progress.latest == "evaluated":
            evaluation = self.history.evaluation
            accuracy = "n/a" if evaluation.accuracy is None else f"{evaluation.accuracy:.2%}"
            self.label.setText(f"Test accuracy {accuracy} on {evaluation.examples:,} examples")
        else:
            self._show_step()

    def _show_step(self) -> None:
        progress = self.history.progress
        parts = [f"Epoch {progress.epoch}/{progress.epochs}", f"step {progress.step:,}/{progress.total_steps:,}"]
        if progress.examples_per_sec is not None:
            parts.append(f"{progress.examples_per_sec:,.0f} examples/s")
        eta = progress.eta_seconds()
        if eta is not None:
            parts.append(f"ETA {format_duration(eta)}")
        self.label.setText(" · ".join(parts))

    def _show_stage(self) -> None:
        stage = self.history.progress.stage
        what = stage.what or stage.stage or "preparing"
        share = stage.share()
        if share is not None:
            self.bar.setRange(0, 1000)
            self.bar.setValue(int(1000 * share))
            self.label.setText(f"{stage.stage.capitalize()} {what}: {share:.0%}")
        else:
            self.bar.setRange(0, 0)  # busy indicator: the size is unknown
            self.label.setText(f"{stage.stage.capitalize()} {what}…")
