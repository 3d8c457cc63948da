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
from PySide6.QtWidgets import QFormLayout, QLabel, QLineEdit, QPlainTextEdit, QSpinBox, QWidget

from gui_app.core.backends.slurm import SIGNAL_S
from gui_app.core.config import RunConfig
from gui_app.ui.dialogs.job_dialog import JobDialog
from gui_app.ui.workers.engine_job import EngineJob

STRATEGIES = ("multi_worker_mirrored", "parameter_server")  # what a Slurm job can run


class SubmitJob(EngineJob):
    """``submit``: its answer is the first and the last line it prints, the job and the run directory."""

    def __init__(self, command: list[str], parent: QWidget, name: str = "sbatch") -> None:
        super().__init__(command, name=name, read=lambda lines: (lines[0], lines[-1]), parent=parent)
        self._lines: list[str] = []
        self._process.text_line.connect(self._take_line)

    def _take_line(self, line: str) -> None:
        self._lines.append(line)
        if len(self._lines) >= 2:
            self._take_answer(self._lines)


class SubmitSlurmDialog(JobDialog):
    submitted = Signal(str, str, str)  # job id, run directory, login node ("" for this machine)

    starting_text = "Submitting…"

    def __init__(self, config: RunConfig, runs_dir: str, parent: QWidget | None,
                 engine_command: Callable[..., list[str]]) -> None:
        super().__init__(parent, engine_command, run_label="Submit")
        self._config, self._runs_dir = config, runs_dir
        self.setWindowTitle("Submit to Slurm")
        self.setMinimumWidth(520)
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
        form = QFormLayout()
        workers = config.strategy.workers
        form.addRow("Run", QLabel(f"{config.dataset.name} / {config.model.name}, {config.strategy.name}, "
                                  f"{workers} worker{'s' if workers != 1 else ''} (one node each)", wordWrap=True))
        form.addRow("Partition", self.partition)
        form.addRow("Time limit", self.time_limit)
        form.addRow("Account", self.account)
        form.addRow("CPUs per task", self.cpus)
        form.addRow("GPUs per node", self.gpus)
        form.addRow("Warning before the limit", self.signal_s)
        form.addRow("More #SBATCH lines", self.extra)
        form.addRow("Login node", self.login)
        form.addRow("", QLabel(f"The run directory goes into {runs_dir} (on a login node: its runs folder); every "
                               "node must see it.", wordWrap=True))
        self._inputs = (self.partition, self.time_limit, self.account, self.cpus, self.gpus, self.signal_s,
                        self.extra, self.login)
        self.form_area.addLayout(form)
        self.succeeded.connect(self._on_submitted)

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

    def _make_job(self) -> EngineJob:
        return SubmitJob(self._engine_command(*self.arguments(str(self._config_file(self._config)))), parent=self)

    def _show_result(self, result: tuple[str, str]) -> None:
        self._show_status(f"Submitted job {result[0]}: {result[1]}")

    def _on_submitted(self, result: tuple[str, str]) -> None:
        self.submitted.emit(result[0], result[1], self.login.text().strip())
        self.accept()
