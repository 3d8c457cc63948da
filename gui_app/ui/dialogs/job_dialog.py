"""JobDialog: a dialog that runs one engine job at a time and shows how it goes.

    class PrepareDialog(JobDialog):
        def _make_job(self) -> EngineJob | None: ...     # the job for what the form says (None: says why)
        def _show_result(self, result) -> None: ...      # how its answer is shown

The base holds what each tool dialog used to wire by hand: the Run button, disabled with the
form's inputs (``_inputs``) while the job runs; the progress bar and the status line, moved by
the job's progress and showing its one error line in the window's ERROR_STYLE; Cancel (SIGTERM,
a kill after ``cancel_grace_s``); and closing: Close, Escape or the title bar's button while a
job runs cancels it and closes once its process has ended, so nothing is left running or
half-written. Subclasses put their form in ``form_area`` and what they show of a result in
``result_area``.

Signals: ``succeeded(object)`` (the job's result), ``failed(str)`` (an error or a cancel, one
line), ``done()`` after either, ``log_line(str)`` (the engine's stderr, for the Log tab).

A Tools-menu dialog also says how it opens over the window's forms (:meth:`JobDialog.for_forms`);
gui_app.ui.window.tool_actions.TOOLS lists those dialogs.
"""
from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QProgressBar,
    QPushButton,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from gui_app.core.config import RunConfig
from gui_app.core.events import Progress
from gui_app.ui.colors import ERROR_STYLE
from gui_app.ui.screen_fit import ScreenFit
from gui_app.ui.workers.engine_job import RUNNING, EngineJob
from gui_app.ui.workers.process import DEFAULT_GRACE_S

if TYPE_CHECKING:
    from gui_app.ui.config.config_panel import ConfigPanel

PROGRESS_STEPS = 1000  # the bar's maximum: fine enough for a smooth bar, whole numbers for Qt


def browse_row(path: QLineEdit, on_browse: Callable[[], None]) -> tuple[QHBoxLayout, QToolButton]:
    """A form's path field with its "Browse…" button beside it (``on_browse`` opens the file
    dialog): the row, and the button (an input, disabled with the field while a job runs)."""
    browse = QToolButton()
    browse.setText("Browse…")
    browse.clicked.connect(on_browse)
    row = QHBoxLayout()
    row.addWidget(path, 1)
    row.addWidget(browse)
    return row, browse


class JobDialog(QDialog):
    succeeded = Signal(object)
    failed = Signal(str)
    # Not "done": that would hide QDialog.done(), the slot accept() and reject() end in.
    job_ended = Signal()
    log_line = Signal(str)

    cancel_grace_s = DEFAULT_GRACE_S
    starting_text = "Starting…"

    def __init__(self, parent: QWidget | None, engine_command: Callable[..., list[str]],
                 run_label: str = "Run") -> None:
        super().__init__(parent)
        self._engine_command = engine_command
        self._job: EngineJob | None = None
        self._close_when_done = False
        self._inputs: tuple[QWidget, ...] = ()  # the form's fields, disabled while a job runs
        self._result_buttons: list[QPushButton] = []  # about the last result: off while the next job runs
        self._tmp: tempfile.TemporaryDirectory | None = None  # config files for the engine to read
        self.screen_fit = ScreenFit(self)  # never taller than a laptop screen with its title bar

        self._progress = QProgressBar(minimum=0, maximum=PROGRESS_STEPS, textVisible=False)
        self._status = QLabel(wordWrap=True, textFormat=Qt.TextFormat.PlainText)
        self._run_button = QPushButton(run_label)
        self._run_button.setDefault(True)
        self._run_button.clicked.connect(self.start)
        self._close_button = QPushButton("Close")
        self._close_button.clicked.connect(self.reject)
        self._buttons = QDialogButtonBox()
        self._buttons.addButton(self._run_button, QDialogButtonBox.ButtonRole.ActionRole)
        self._buttons.addButton(self._close_button, QDialogButtonBox.ButtonRole.RejectRole)

        layout = QVBoxLayout(self)
        self.form_area = QVBoxLayout()
        self.result_area = QVBoxLayout()
        layout.addLayout(self.form_area)
        layout.addWidget(self._progress)
        layout.addWidget(self._status)
        layout.addLayout(self.result_area, 1)
        layout.addWidget(self._buttons)

    @classmethod
    def for_forms(cls, forms: ConfigPanel, parent: QWidget,
                  engine_command: Callable[..., list[str]]) -> JobDialog | None:
        """This dialog over what the window's forms say (the Tools menu opens it so); None when
        they give it nothing to run."""
        raise NotImplementedError(f"{cls.__name__} does not open from the Tools menu")

    # ---- what a subclass says ------------------------------------------------------------------
    def _make_job(self) -> EngineJob | None:
        """The job for what the form says, or None after saying what is missing (``_show_status``)."""
        raise NotImplementedError

    def _show_result(self, result: Any) -> None:
        """Show the job's answer (the base has already filled the progress bar)."""
        raise NotImplementedError

    def _cancelled(self, job: EngineJob) -> str:
        """What a cancel leaves behind, said once the process has ended."""
        return "Cancelled."

    # ---- public ----------------------------------------------------------------------------------
    def is_running(self) -> bool:
        return self._job is not None and self._job.is_running()

    def start(self) -> None:
        if self.is_running():
            return
        job = self._make_job()
        if job is None:
            return
        (job.on_progress(self._on_progress).on_result(self._on_result).on_failure(self._on_failed)
            .on_finished(lambda: self._on_finished(job)).on_log_line(self.log_line))
        previous, self._job = self._job, job
        self._set_running(True)
        self._progress.setValue(0)
        self._show_status(self.starting_text)
        job.start(replacing=previous)

    def cancel(self) -> None:
        """End the job's process; it removes what it had half written (killed after the grace period)."""
        if self._job is not None and self._job.state == RUNNING:
            self._close_button.setEnabled(False)
            self._show_status("Cancelling…")
            self._job.cancel(self.cancel_grace_s)

    def shutdown(self) -> None:
        """Cancel and wait until the process has ended (the window is closing: a job left running
        would be killed with the application, before it could remove its temporaries)."""
        job = self._job
        if job is not None and job.is_running():
            self.cancel()
            job.cancel(self.cancel_grace_s, wait=True)

    def reject(self) -> None:
        """Close; while a job runs, cancel it and close once its process has ended. (QDialog's
        close button and Escape come here too.)"""
        if self.is_running():
            self._close_when_done = True
            self.cancel()
            return
        super().reject()

    # ---- the job's signals -------------------------------------------------------------------------
    def _on_progress(self, progress: Progress) -> None:
        share = progress.share()
        if share is not None:
            self._progress.setValue(round(min(max(share, 0.0), 1.0) * PROGRESS_STEPS))
        if progress.message:
            self._show_status(progress.message + ("…" if share is None or share < 1 else ""))

    def _on_result(self, result: Any) -> None:
        self._progress.setValue(PROGRESS_STEPS)
        self._show_result(result)
        self.succeeded.emit(result)

    def _on_failed(self, message: str) -> None:
        self._progress.setValue(0)
        self._show_status(message, error=True)
        self.failed.emit(message)

    def _on_finished(self, job: EngineJob) -> None:
        if job.cancelled:
            self._progress.setValue(0)
            message = self._cancelled(job)
            self._show_status(message)
            self.failed.emit(message)
        self._set_running(False)
        self.job_ended.emit()
        if self._close_when_done:
            self._close_when_done = False
            super().reject()

    # ---- helpers -------------------------------------------------------------------------------------
    def _add_result_button(self, text: str, slot: Callable[[], None]) -> QPushButton:
        """A button about the last result ("Open folder", "Train on these shards"), beside Run: off
        until :meth:`_show_result` turns it on, and off again while the next job runs."""
        button = QPushButton(text)
        button.setEnabled(False)
        button.clicked.connect(slot)
        self._buttons.addButton(button, QDialogButtonBox.ButtonRole.ActionRole)
        self._result_buttons.append(button)
        return button

    def _set_running(self, running: bool) -> None:
        for widget in (*self._inputs, self._run_button):
            widget.setEnabled(not running)
        if running:  # a result turns its buttons on again
            for button in self._result_buttons:
                button.setEnabled(False)
        self._close_button.setEnabled(True)
        self._close_button.setText("Cancel" if running else "Close")

    def _show_status(self, text: str, error: bool = False) -> None:
        self._status.setStyleSheet(ERROR_STYLE if error else "")
        self._status.setText(text)

    def _config_file(self, config: RunConfig) -> Path:
        """``config`` saved for the engine to read, in this dialog's own temporary folder."""
        if self._tmp is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="replica-studio-job-")
        path = Path(self._tmp.name) / "config.json"
        config.save(path)
        return path
