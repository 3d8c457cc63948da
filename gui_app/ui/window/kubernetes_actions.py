"""KubernetesActions: Run -> Submit to Kubernetes… (gui_app/ui/window/submit_actions.py: when it
applies, and the window following the run it applied).

It needs kubectl on PATH and a valid multi_worker_mirrored config on the forms (the plain
manifest's strategy). The dialog (gui_app/ui/dialogs/submit_kubernetes.py) applies the run; then
the window follows it from its local record in the runs folder (``attach``, which copies the
chief's events there from ``kubectl logs``: engine/schedulers/kubernetes/runs.py) from its first
event, while the pods start too. The run list shows the Job's state meanwhile ("pending",
"running": gui_app/core/backends/kubernetes.py). Stop deletes the Job (its pods stop with a
checkpoint), Resume applies the kept manifest again; closing the window leaves the Job running,
and attaching again from the run list follows it on.
"""
from __future__ import annotations

import shutil

from gui_app.core.config import RunConfig
from gui_app.ui.dialogs.submit_kubernetes import STRATEGIES, SubmitKubernetesDialog
from gui_app.ui.window.submit_actions import SubmitActions

NO_KUBECTL = "kubectl is not on PATH: install it and set up its context for the cluster"
NOT_MULTI_WORKER = "needs a valid multi_worker_mirrored configuration on the forms"


class KubernetesActions(SubmitActions):
    tip = "Submit the multi-worker run on the forms to a Kubernetes cluster (kubectl apply) and follow it"
    strategies = STRATEGIES
    not_applicable = NOT_MULTI_WORKER

    def why_not(self) -> str:
        return NO_KUBECTL if shutil.which("kubectl") is None else super().why_not()

    def _dialog(self, config: RunConfig) -> SubmitKubernetesDialog:
        dialog = SubmitKubernetesDialog(config, str(self._state.runs_dir), self._window, self._engine_command)
        dialog.submitted.connect(self._on_submitted)
        return dialog

    def _on_submitted(self, job: str, record: str) -> None:
        self._follow(record, f"Applied Kubernetes job {job}", f"Kubernetes job {job} applied: waiting for its pods "
                                                               "to start (the run list shows its state)…")
