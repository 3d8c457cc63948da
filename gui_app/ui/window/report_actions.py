"""ReportActions: File -> Save report…, the run as one HTML file that opens in any browser.

The run is the one selected in the run list, else the one on screen (as the Export menu
chooses); a run of an SSH host has its files there, so it is not offered. The page is written
by the engine's ``report`` command (gui_app/core/report), run as an engine process like every
other job of the window (gui_app.ui.workers.engine_job), so reading a long run's events never
holds up the window. How it went is said in the status line; a failure in a dialog too.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QFileDialog, QMessageBox, QWidget

from gui_app.core.formats import format_size
from gui_app.core.ssh_hosts import split_run_key
from gui_app.ui.settings import Settings
from gui_app.ui.shell import open_warning
from gui_app.ui.window.window_state import WindowState
from gui_app.ui.workers.engine_job import EngineJob

REPORT_TIMEOUT_S = 300.0  # a very long run's events are read in seconds; a hung disk must not hang the job


def _read_answer(value: dict) -> tuple[str, int]:
    return str(value["path"]), int(value["size_bytes"])


class ReportActions(QObject):
    log_line = Signal(str)  # the engine's stderr, for the Log tab
    saved = Signal(str)  # the report's path, once written
    failed = Signal(str)

    def __init__(self, window: QWidget, state: WindowState, settings: Settings,
                 engine_command: Callable[..., list[str]]) -> None:
        super().__init__(window)
        self._window, self._state, self._settings, self._engine_command = window, state, settings, engine_command
        self.job: EngineJob | None = None
        self.message_box: QMessageBox | None = None  # the last failure said

    def report_run(self) -> str | None:
        """The run a report is written of: the one selected in the run list, else the one on
        screen; None when there is none here (a host's run keeps its files there)."""
        selection = self._state.selection
        run = selection[0].path if len(selection) == 1 else self._state.shown_run
        if not run or split_run_key(run)[0] is not None:
            return None
        return run

    def save_report_dialog(self) -> None:
        run = self.report_run()
        if run is None:
            return
        folder = Path(self._settings.last_export_dir or Path.home())
        if not folder.is_dir():
            folder = Path.home()
        path, _ = QFileDialog.getSaveFileName(self._window, "Save the run's report",
                                              str(folder / f"{Path(run).name}.html"), "Web pages (*.html)")
        if path:
            self.save_report(run, path)

    def save_report(self, run_dir: str, path: str) -> EngineJob:
        """Write the report of ``run_dir`` to ``path`` in an engine process."""
        if not path.lower().endswith((".html", ".htm")):
            path += ".html"
        self._state.set_status(f"Writing the report of {Path(run_dir).name}…")
        self.job = (EngineJob(self._engine_command("report", run_dir, "--output", path, "--json"), name="the report",
                              answer="report", read=_read_answer, timeout_s=REPORT_TIMEOUT_S, parent=self)
                    .on_result(self._on_saved).on_failure(self._on_failed).on_log_line(self.log_line)
                    .start(replacing=self.job))
        return self.job

    def close(self) -> None:
        if self.job is not None and self.job.is_running():
            self.job.cancel(wait=True)

    def _on_saved(self, answer: tuple[str, int]) -> None:
        path, size = answer
        self._settings.last_export_dir = str(Path(path).parent)
        self._state.set_status(f"Report saved to {path} ({format_size(size)})")
        self.saved.emit(path)

    def _on_failed(self, message: str) -> None:
        self._state.set_status(f"Report not saved: {message}")
        self.failed.emit(message)
        self.message_box = open_warning("Cannot save the report", message, self._window)
