"""SubmitActions: a Run -> Submit to a scheduler… entry (Slurm, Kubernetes), and the window
following the run it submitted.

The entry applies while the window is idle and the forms hold a valid config of a strategy the
scheduler can run (and whatever the subclass adds: a command on PATH); otherwise its tooltip and
status tip say what is missing, so the menu never holds an entry that is off for no reason. The
subclass makes the dialog (it runs ``submit`` as an engine job) and says what the run became.
Once submitted, the window follows the run at once from its first event (RunSupervisor.follow:
``attach``, attached while the job waits, so no poll of the window's own notices the start, and
Stop works on a pending job as on a running one); the run list shows the job's state meanwhile.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable, ClassVar

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QWidget

from gui_app.core.config import RunConfig
from gui_app.ui.config.config_panel import ConfigPanel
from gui_app.ui.dialogs.job_dialog import JobDialog
from gui_app.ui.window.runs_panel import RunsPanel
from gui_app.ui.window.shown_run import ShownRun
from gui_app.ui.window.window_state import TRAINING, WindowState
from gui_app.ui.workers.supervisor import RunSupervisor

BUSY = "the window is busy with a run"


class SubmitActions(QObject):
    note = Signal(str)
    log_line = Signal(str)

    tip: ClassVar[str]  # what the entry does
    strategies: ClassVar[tuple[str, ...]]  # the strategies the scheduler's jobs can run
    not_applicable: ClassVar[str]  # said when the forms hold none of them

    def __init__(self, window: QWidget, state: WindowState, action: QAction, *, supervisor: RunSupervisor,
                 forms: ConfigPanel, shown: ShownRun, runs: RunsPanel,
                 engine_command: Callable[..., list[str]]) -> None:
        super().__init__(window)
        self._window, self._state, self._action = window, state, action
        self._supervisor, self._forms, self._shown, self._runs = supervisor, forms, shown, runs
        self._engine_command = engine_command
        self.dialog: JobDialog | None = None
        action.triggered.connect(self.open)
        for signal in (state.run_state_changed, forms.validity_changed, forms.edited):
            signal.connect(self._update)
        self._update()

    def _config(self) -> RunConfig | None:
        config = self._forms.config()
        return config if config is not None and config.strategy.name in self.strategies else None

    def why_not(self) -> str:
        """Why the entry does not apply now ("" when it does)."""
        if self._config() is None:
            return self.not_applicable
        return "" if self._state.is_idle() else BUSY

    def _update(self, *_) -> None:
        why = self.why_not()
        self._action.setEnabled(not why)
        tip = f"{self.tip} ({why})" if why else self.tip
        self._action.setToolTip(tip)
        self._action.setStatusTip(tip)

    def open(self) -> JobDialog | None:
        self._forms.flush()
        self._update()
        config = self._config()
        if config is None or self.why_not():
            return None
        dialog = self.dialog = self._dialog(config)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.log_line.connect(self.log_line)
        dialog.open()
        return dialog

    def _dialog(self, config: RunConfig) -> JobDialog:
        """The scheduler's dialog for ``config``, its ``submitted`` signal connected."""
        raise NotImplementedError

    def _follow(self, run_dir: str, note: str, status: str) -> None:
        """Follow the run just submitted, or only name it when the window is busy meanwhile."""
        self.dialog = None
        if not self._state.is_idle():
            text = f"{note}: follow it with replica-studio attach {run_dir}"
            self._state.set_status(text)
            self.note.emit(text)
            return
        self._shown.clear()
        self.note.emit(f"{note}: {Path(run_dir).name}")
        self._supervisor.follow(run_dir)
        self._state.set_status(status)
        self._state.set_tab(TRAINING)
        self._runs.refresh()
