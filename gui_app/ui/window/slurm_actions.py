"""SlurmActions: Run -> Submit to Slurm… (gui_app/ui/window/submit_actions.py: when it applies,
and the window following the run it submitted).

The forms must hold a valid multi-worker config (multi_worker_mirrored or parameter_server). The
dialog (gui_app/ui/dialogs/submit_slurm.py) submits it; once Slurm took the job the window
follows the run while the job waits in the queue (Stop cancels a pending job as well as a
running one: ``scancel``, through ``attach``), and the run list shows the job's state ("pending
(Priority)"). A job submitted on a login node over SSH whose run directory this machine does not
see is only named in the status line and the Log tab.
"""
from __future__ import annotations

from gui_app.core.config import RunConfig
from gui_app.core.rundir import is_run_dir
from gui_app.ui.dialogs.submit_slurm import STRATEGIES, SubmitSlurmDialog
from gui_app.ui.window.submit_actions import SubmitActions


class SlurmActions(SubmitActions):
    tip = "Submit the multi-worker run on the forms as a Slurm job (sbatch) and follow it"
    strategies = STRATEGIES
    not_applicable = "needs a valid multi_worker_mirrored or parameter_server configuration on the forms"

    def _dialog(self, config: RunConfig) -> SubmitSlurmDialog:
        dialog = SubmitSlurmDialog(config, str(self._state.runs_dir), self._window, self._engine_command)
        dialog.submitted.connect(self._on_submitted)
        return dialog

    def _on_submitted(self, job_id: str, run_dir: str, host: str) -> None:
        note = f"Submitted Slurm job {job_id}{f' on {host}' if host else ''}"
        if not is_run_dir(run_dir):
            self.dialog = None
            text = f"{note}: {run_dir} (not in a folder this machine sees; follow it there with replica-studio attach)"
            self._state.set_status(text)
            self.note.emit(text)
            return
        self._follow(run_dir, note, f"Slurm job {job_id} submitted: waiting for it to start (the run list shows "
                                    "why it waits)…")
