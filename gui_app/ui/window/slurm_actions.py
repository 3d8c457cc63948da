"""SlurmActions: Run -> Submit to Slurm…, and the window following the run it submitted.

The action applies while the window is idle and the forms hold a valid multi-worker config
(multi_worker_mirrored or parameter_server). The dialog (gui_app/ui/dialogs/submit_slurm.py)
submits it; once Slurm took the job the window follows the run at once (``attach`` from its
first event, RunSupervisor.follow): attached while the job waits in the queue, the window needs
no poll of its own to notice the start, Stop cancels a pending job as well as a running one
(``scancel``, through ``attach``), and the charts fill from the run's first step. The run list
shows the job's state meanwhile ("pending (Priority)"). A job submitted on a login node over
SSH whose run directory this machine does not see is only named in the status line and the Log
tab.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QWidget

from gui_app.core.rundir import is_run_dir
from gui_app.ui.config.config_panel import ConfigPanel
from gui_app.ui.dialogs.submit_slurm import STRATEGIES, SubmitSlurmDialog
from gui_app.ui.window.runs_panel import RunsPanel
from gui_app.ui.window.shown_run import ShownRun
from gui_app.ui.window.window_state import TRAINING, WindowState
from gui_app.ui.workers.supervisor import RunSupervisor


class SlurmActions(QObject):
    note = Signal(str)
    log_line = Signal(str)

    def __init__(self, window: QWidget, state: WindowState, action: QAction, *, supervisor: RunSupervisor,
                 forms: ConfigPanel, shown: ShownRun, runs: RunsPanel,
                 engine_command: Callable[..., list[str]]) -> None:
        super().__init__(window)
        self._window, self._state, self._action = window, state, action
        self._supervisor, self._forms, self._shown, self._runs = supervisor, forms, shown, runs
        self._engine_command = engine_command
        self.dialog: SubmitSlurmDialog | None = None
        action.triggered.connect(self.open)
        for signal in (state.run_state_changed, forms.validity_changed, forms.edited):
            signal.connect(self._update)
        self._update()

    def _config(self):
        config = self._forms.config()
        return config if config is not None and config.strategy.name in STRATEGIES else None

    def _update(self, *_) -> None:
        self._action.setEnabled(self._state.is_idle() and self._config() is not None)

    def open(self) -> SubmitSlurmDialog | None:
        self._forms.flush()
        config = self._config()
        if config is None or not self._state.is_idle():
            return None
        dialog = self.dialog = SubmitSlurmDialog(config, str(self._state.runs_dir), self._window, self._engine_command)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.log_line.connect(self.log_line)
        dialog.submitted.connect(self._on_submitted)
        dialog.open()
        return dialog

    def _on_submitted(self, job_id: str, run_dir: str, host: str) -> None:
        self.dialog = None
        where = f" on {host}" if host else ""
        if not self._state.is_idle() or not is_run_dir(run_dir):
            text = (f"Submitted Slurm job {job_id}{where}: {run_dir} (not in a folder this machine sees; follow it "
                    f"there with replica-studio attach)")
            self._state.set_status(text)
            self.note.emit(text)
            return
        self._shown.clear()
        self.note.emit(f"Submitted Slurm job {job_id}{where}: {Path(run_dir).name}; following it once it starts")
        self._supervisor.follow(run_dir)
        self._state.set_status(f"Slurm job {job_id} submitted: waiting for it to start (the run list shows why "
                               "it waits)…")
        self._state.set_tab(TRAINING)
        self._runs.refresh()
