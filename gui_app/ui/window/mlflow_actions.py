"""MlflowActions: File -> Export run to MLflow…, the run written to an MLflow tracking folder or
server by the engine's ``export-run`` command (gui_app/engine/commands/export_run.py).

The run is the one File -> Save report… writes (selected in the run list, else on screen; not a
host's run). The window asks for the tracking folder or URI -- remembered for the next time --
and runs the command as an engine process (gui_app.ui.workers.engine_job): the window never
imports MLflow, whose import alone takes about a second. How it went is said in the status line;
a failure (MLflow not installed, a store that cannot be written, a server that refuses) in a
dialog too.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QInputDialog, QLineEdit, QMessageBox, QWidget

from gui_app.core.answers import MlflowExport, reader
from gui_app.ui.settings import Settings
from gui_app.ui.shell import open_warning
from gui_app.ui.window.window_state import WindowState
from gui_app.ui.workers.engine_job import EngineJob

# A long run's events and its model are read and copied into the store; a server that does not
# answer must not hold the job forever (MLflow's own HTTP retries take minutes).
EXPORT_TIMEOUT_S = 600.0
# What each answer's "action" means, in the status line.
_DONE = {"created": "exported to", "replaced": "exported again (it changed since) to", "unchanged":
         "already in"}


class MlflowActions(QObject):
    log_line = Signal(str)  # the engine's stderr, for the Log tab
    exported = Signal(object)  # the command's answer (MlflowExport)
    failed = Signal(str)

    def __init__(self, window: QWidget, state: WindowState, settings: Settings,
                 engine_command: Callable[..., list[str]], export_run: Callable[[], str | None]) -> None:
        super().__init__(window)
        self._window, self._state, self._settings, self._engine_command = window, state, settings, engine_command
        self._export_run = export_run
        self.job: EngineJob | None = None
        self._target = ""  # the store of the export under way
        self.message_box: QMessageBox | None = None  # the last failure said

    def export_dialog(self) -> None:
        run = self._export_run()
        if run is None:
            return
        default = self._settings.last_mlflow_target or str(Path.home() / "mlruns")
        target, ok = QInputDialog.getText(
            self._window, "Export run to MLflow",
            f"Export {Path(run).name} to the MLflow tracking folder or URI\n"
            "(a folder is a file store; or file://, http://… of a tracking server):",
            QLineEdit.EchoMode.Normal, default)
        if ok and target.strip():
            self.export(run, target.strip())

    def export(self, run_dir: str, target: str) -> EngineJob:
        """Write ``run_dir`` to the MLflow store ``target`` in an engine process."""
        self._settings.last_mlflow_target = target
        self._target = target
        self._state.set_status(f"Exporting {Path(run_dir).name} to MLflow at {target}…")
        self.job = (EngineJob(self._engine_command("export-run", run_dir, "--mlflow", target, "--json"),
                              name="the MLflow export", answer=MlflowExport.TYPE, read=reader(MlflowExport),
                              timeout_s=EXPORT_TIMEOUT_S, parent=self)
                    .on_result(self._on_exported).on_failure(self._on_failed).on_log_line(self.log_line)
                    .start(replacing=self.job))
        return self.job

    def close(self) -> None:
        if self.job is not None and self.job.is_running():
            self.job.cancel(wait=True)

    def _on_exported(self, answer: MlflowExport) -> None:
        done = _DONE.get(answer.action, "exported to")
        self._state.set_status(f"Run {done} MLflow at {answer.tracking_uri or self._target}: "
                               f"run {answer.run_id}, {answer.metrics} metric values")
        self.exported.emit(answer)

    def _on_failed(self, message: str) -> None:
        self._state.set_status(f"Not exported to MLflow: {message}")
        self.failed.emit(message)
        self.message_box = open_warning("Cannot export the run to MLflow", message, self._window)
