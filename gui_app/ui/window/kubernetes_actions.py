"""KubernetesActions: Run -> Submit to Kubernetes…, and the window following the run it applied.

The action applies while the window is idle, kubectl is on PATH and the forms hold a valid
multi_worker_mirrored config (the plain manifest's strategy); otherwise its tooltip and status
tip say which of these is missing. The dialog (gui_app/ui/dialogs/submit_kubernetes.py) applies
the run; then the window follows it from its local record in the runs folder (``attach``, which
copies the chief's events there from ``kubectl logs``: engine/cluster/kubernetes_runs.py) from its
first event, while the pods start too. The run list shows the Job's state meanwhile ("pending",
"running": gui_app/core/kubernetes_jobs.py). Stop deletes the Job (its pods stop with a
checkpoint), Resume applies the kept manifest again; closing the window leaves the Job running,
and attaching again from the run list follows it on.
"""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import Callable

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QWidget

from gui_app.ui.config.config_panel import ConfigPanel
from gui_app.ui.dialogs.submit_kubernetes import STRATEGIES, SubmitKubernetesDialog
from gui_app.ui.window.runs_panel import RunsPanel
from gui_app.ui.window.shown_run import ShownRun
from gui_app.ui.window.window_state import TRAINING, WindowState
from gui_app.ui.workers.supervisor import RunSupervisor

TIP = "Submit the multi-worker run on the forms to a Kubernetes cluster (kubectl apply) and follow it"
NO_KUBECTL = "kubectl is not on PATH: install it and set up its context for the cluster"
NOT_MULTI_WORKER = "needs a valid multi_worker_mirrored configuration on the forms"
BUSY = "the window is busy with a run"


class KubernetesActions(QObject):
    note = Signal(str)
    log_line = Signal(str)

    def __init__(self, window: QWidget, state: WindowState, action: QAction, *, supervisor: RunSupervisor,
                 forms: ConfigPanel, shown: ShownRun, runs: RunsPanel,
                 engine_command: Callable[..., list[str]]) -> None:
        super().__init__(window)
        self._window, self._state, self._action = window, state, action
        self._supervisor, self._forms, self._shown, self._runs = supervisor, forms, shown, runs
        self._engine_command = engine_command
        self.dialog: SubmitKubernetesDialog | None = None
        action.triggered.connect(self.open)
        for signal in (state.run_state_changed, forms.validity_changed, forms.edited):
            signal.connect(self._update)
        self._update()

    def _config(self):
        config = self._forms.config()
        return config if config is not None and config.strategy.name in STRATEGIES else None

    def why_not(self) -> str:
        """Why the action does not apply now ("" when it does)."""
        if shutil.which("kubectl") is None:
            return NO_KUBECTL
        if self._config() is None:
            return NOT_MULTI_WORKER
        return "" if self._state.is_idle() else BUSY

    def _update(self, *_) -> None:
        why = self.why_not()
        self._action.setEnabled(not why)
        tip = f"{TIP} ({why})" if why else TIP
        self._action.setToolTip(tip)
        self._action.setStatusTip(tip)

    def open(self) -> SubmitKubernetesDialog | None:
        self._forms.flush()
        self._update()
        config = self._config()
        if config is None or self.why_not():
            return None
        dialog = self.dialog = SubmitKubernetesDialog(config, str(self._state.runs_dir), self._window,
                                                      self._engine_command)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.log_line.connect(self.log_line)
        dialog.submitted.connect(self._on_submitted)
        dialog.open()
        return dialog

    def _on_submitted(self, job: str, record: str) -> None:
        self.dialog = None
        if not self._state.is_idle():
            text = f"Applied Kubernetes job {job}: follow it with replica-studio attach {record}"
            self._state.set_status(text)
            self.note.emit(text)
            return
        self._shown.clear()
        self.note.emit(f"Applied Kubernetes job {job}: {Path(record).name}; following its chief's events")
        self._supervisor.follow(record)
        self._state.set_status(f"Kubernetes job {job} applied: waiting for its pods to start (the run list shows "
                               "its state)…")
        self._state.set_tab(TRAINING)
        self._runs.refresh()
