"""SubmitSlurmDialog (Run -> Submit to Slurm…): the run on the forms as a new Slurm job.

It runs ``submit CONFIG --slurm`` (engine/commands/submit.py) as an engine job, off the
GUI thread, with what the form asks of Slurm: partition, time limit, account, CPUs per task,
GPUs per node, more ``#SBATCH`` lines, the warning before the time limit (0: no warning, no
requeue) and the login node (empty: sbatch on this machine; else an SSH host, ``submit --host``).
The run directory goes into the window's runs folder, which every node must see (on a login
node: that host's runs folder). ``submit`` prints the job id and the run directory:
``submitted(job_id, run_dir, host)``; sbatch missing or refusing is its one line, shown here.
"""
from __future__ import annotations

from typing import Callable

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QLineEdit, QPlainTextEdit, QSpinBox, QWidget

from gui_app.core.backends.slurm import SIGNAL_S
from gui_app.core.config import RunConfig
from gui_app.ui.dialogs.submit import SubmitDialog

STRATEGIES = ("multi_worker_mirrored", "parameter_server")  # what a Slurm job can run


class SubmitSlurmDialog(SubmitDialog):
    submitted = Signal(str, str, str)  # job id, run directory, login node ("" for this machine)

    starting_text = "Submitting…"
    scheduler, worker_runs_in, program, done_text = "Slurm", "node", "sbatch", "Submitted"

    def __init__(self, config: RunConfig, runs_dir: str, parent: QWidget | None,
                 engine_command: Callable[..., list[str]]) -> None:
        super().__init__(config, runs_dir, parent, engine_command)
        self.partition, self.time_limit, self.account = QLineEdit(), QLineEdit(), QLineEdit()
        self.partition.setPlaceholderText("the cluster's default")
        self.time_limit.setPlaceholderText("the partition's limit (minutes, H:MM:SS or D-HH:MM)")
        self.account.setPlaceholderText("your default account")
        self.cpus, self.gpus = QSpinBox(minimum=0, maximum=1024), QSpinBox(minimum=0, maximum=64)
        for spin in (self.cpus, self.gpus):
            spin.setSpecialValueText("the cluster's default")
        self.signal_s = QSpinBox(minimum=0, maximum=86_400, value=SIGNAL_S, suffix=" s")
        self.signal_s.setSpecialValueText("none (no checkpoint before the limit, no requeue)")
        self.signal_s.setToolTip("Slurm warns the job this long before its time limit (or a preemption): the "
                                 "workers stop with a checkpoint and the job requeues itself to continue the run")
        self.extra = QPlainTextEdit()
        self.extra.setPlaceholderText("more #SBATCH options, one a line: --qos=long")
        self.extra.setFixedHeight(self.fontMetrics().height() * 4)
        self.login = QLineEdit()
        self.login.setPlaceholderText("empty: sbatch on this machine; else an SSH host (a login node)")
        self._add_form((("Partition", self.partition), ("Time limit", self.time_limit), ("Account", self.account),
                        ("CPUs per task", self.cpus), ("GPUs per node", self.gpus),
                        ("Warning before the limit", self.signal_s), ("More #SBATCH lines", self.extra),
                        ("Login node", self.login)),
                       f"The run directory goes into {runs_dir} (on a login node: its runs folder); every node "
                       "must see it.")

    def arguments(self, config_path: str) -> list[str]:
        """The ``submit`` command line the form says."""
        args = ["submit", config_path, "--slurm", "--signal-seconds", str(self.signal_s.value())]
        for flag, field in (("--partition", self.partition), ("--time", self.time_limit),
                            ("--account", self.account)):
            if field.text().strip():
                args += [flag, field.text().strip()]
        for flag, spin in (("--cpus-per-task", self.cpus), ("--gpus-per-node", self.gpus)):
            if spin.value():
                args += [flag, str(spin.value())]
        args += [f"--sbatch={line.strip()}" for line in self.extra.toPlainText().splitlines() if line.strip()]
        host = self.login.text().strip()
        return [*args, "--host", host] if host else [*args, "--runs-dir", self._runs_dir]

    def _on_submitted(self, result: tuple[str, str]) -> None:
        self.submitted.emit(result[0], result[1], self.login.text().strip())
        self.accept()
