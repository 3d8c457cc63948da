"""What the two submit dialogs (submit_slurm.py, submit_kubernetes.py) share: ``submit CONFIG
--SCHEDULER`` run as an engine job (:class:`SubmitJob`), and the dialog around the scheduler's
own form (:class:`SubmitDialog`): the run it submits, the form's fields, a note under them, the
job and how its answer is shown."""
from __future__ import annotations

from typing import Callable, ClassVar

from PySide6.QtWidgets import QFormLayout, QLabel, QWidget

from gui_app.core.config import RunConfig
from gui_app.ui.dialogs.job_dialog import JobDialog
from gui_app.ui.workers.engine_job import EngineJob


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


class SubmitDialog(JobDialog):
    """A scheduler's submit dialog: a subclass builds its fields, hands them to :meth:`_add_form`,
    and says its ``submit`` command line (:meth:`arguments`) and what it emits once submitted."""

    scheduler: ClassVar[str]  # the title's: "Slurm"
    worker_runs_in: ClassVar[str]  # what one worker gets: "node"
    program: ClassVar[str]  # the scheduler's command, named in an error line: "sbatch"
    done_text: ClassVar[str]  # the status once it answered: "Submitted"

    def __init__(self, config: RunConfig, runs_dir: str, parent: QWidget | None,
                 engine_command: Callable[..., list[str]]) -> None:
        super().__init__(parent, engine_command, run_label="Submit")
        self._config, self._runs_dir = config, runs_dir
        self.setWindowTitle(f"Submit to {self.scheduler}")
        self.setMinimumWidth(520)
        self.succeeded.connect(self._on_submitted)

    def _add_form(self, rows: tuple[tuple[str, QWidget], ...], note: str) -> None:
        """The form: the run, then ``rows`` (label, field: disabled while the job runs), then ``note``."""
        form = QFormLayout()
        config, workers = self._config, self._config.strategy.workers
        form.addRow("Run", QLabel(f"{config.dataset.name} / {config.model.name}, {config.strategy.name}, "
                                  f"{workers} worker{'s' if workers != 1 else ''} (one {self.worker_runs_in} each)",
                                  wordWrap=True))
        for label, field in rows:
            form.addRow(label, field)
        form.addRow("", QLabel(note, wordWrap=True))
        self._inputs = tuple(field for _, field in rows)
        self.form_area.addLayout(form)

    def arguments(self, config_path: str) -> list[str]:
        """The ``submit`` command line the form says."""
        raise NotImplementedError

    def _make_job(self) -> EngineJob:
        command = self._engine_command(*self.arguments(str(self._config_file(self._config))))
        return SubmitJob(command, parent=self, name=self.program)

    def _show_result(self, result: tuple[str, str]) -> None:
        self._show_status(f"{self.done_text} job {result[0]}: {result[1]}")

    def _on_submitted(self, result: tuple[str, str]) -> None:
        raise NotImplementedError
