"""RehearseDialog (Tools -> Rehearse preemption…): ``replica-studio rehearse`` on the forms'
configuration, its certificate shown (docs/detached.md, "Rehearse a preemption").

The engine trains the configuration twice -- interrupted at the step asked for (the run's
process, or worker K of a cluster, here or on its SSH host, sent SIGKILL or SIGTERM) and resumed, then straight
through -- and compares them step for step; this dialog only asks for the step, the signal and
the worker, runs ``rehearse CONFIG --at STEP --signal S [--worker K] --json`` as an engine job
and shows the :class:`~gui_app.core.answers.Certificate` in the engine's own words
(gui_app.core.rehearsal.sentences). Exit 1 with a certificate is an answer (not equivalent);
exit 1 without one is the failure line of a run that did not end. Cancel stops the rehearsal,
which stops its run with a checkpoint first.

Below the certificate, both runs' curves overlaid (gui_app/ui/charts/rehearsal_chart.py: the
interruption and the first difference marked). The two run folders the certificate names are
read off the GUI thread (gui_app/ui/workers/background.py, as the Compare dialog reads its runs):
a long run's events take seconds to decode.
"""
from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Callable

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QComboBox, QFormLayout, QLabel, QPlainTextEdit, QSpinBox, QWidget

from gui_app.core.answers import Certificate, reader
from gui_app.core.comparison import RunFigures
from gui_app.core.config import RunConfig
from gui_app.core.engine_output import EXIT_FAILED, EXIT_OK
from gui_app.core.rehearsal import sentences
from gui_app.identity import app_command
from gui_app.ui.charts.rehearsal_chart import RehearsalChart
from gui_app.ui.colors import ERROR_STYLE
from gui_app.ui.dialogs.compare import read_all_figures
from gui_app.ui.dialogs.job_dialog import JobDialog
from gui_app.ui.workers.background import Background
from gui_app.ui.workers.engine_job import EngineJob

if TYPE_CHECKING:
    from gui_app.ui.config.config_panel import ConfigPanel

SIGNALS = (("KILL", "SIGKILL: killed, the work since its last checkpoint lost"),
           ("TERM", "SIGTERM: asked to stop, it checkpoints first"))


class RehearseDialog(JobDialog):
    curves_shown = Signal()  # the runs' curves are drawn, or the note says why they cannot be
    starting_text = "Training it interrupted, resuming it, then training it straight through (two runs)…"

    def __init__(self, config: RunConfig, parent: QWidget | None = None,
                 engine_command: Callable[..., list[str]] = app_command) -> None:
        super().__init__(parent, engine_command, run_label="Rehearse")
        self._config = config
        self.certificate: Certificate | None = None
        self.setWindowTitle("Rehearse a preemption")
        self.setMinimumWidth(600)

        self._step = QSpinBox(minimum=1, maximum=10**9, value=max(1, config.training.checkpoint_every_steps + 1))
        self._signal = QComboBox()
        for key, label in SIGNALS:
            self._signal.addItem(label, key)
        # The workers train starts: a local cluster's, or the listed ones (the chief here, those on
        # SSH hosts); the engine refuses one started by hand in its own line. A scheduler's: none.
        cfg = config.strategy
        signalled = cfg.name == "multi_worker_mirrored" and not isinstance(cfg.cluster, str)
        count = len(cfg.cluster) if isinstance(cfg.cluster, tuple) else cfg.workers
        self._worker = QSpinBox(minimum=-1, maximum=max(count - 1, 0) if signalled else -1)
        self._worker.setSpecialValueText("the run's process")
        self._worker.setValue(-1)
        self._worker.setEnabled(signalled)
        form = QFormLayout()
        form.addRow(QLabel("Train the configuration on the forms twice: once interrupted at a step and resumed "
                           "as you would, once straight through; then compare every step's batch, loss and "
                           "replicas, the optimizer's state and the final weights.", wordWrap=True))
        form.addRow("Interrupt at step", self._step)
        form.addRow("Signal", self._signal)
        form.addRow("Worker", self._worker)
        self._inputs = (self._step, self._signal, self._worker)
        self.form_area.addLayout(form)

        self._text = QPlainTextEdit(readOnly=True)
        self._text.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self._text.setMinimumHeight(120)
        self.result_area.addWidget(self._text)
        self.chart = RehearsalChart()
        self.chart.setMinimumHeight(220)
        self.chart.setVisible(False)  # until a certificate names two runs
        self._curves_note = QLabel(wordWrap=True, textFormat=Qt.TextFormat.PlainText)
        self._curves_note.setVisible(False)
        self.result_area.addWidget(self.chart, 1)
        self.result_area.addWidget(self._curves_note)
        self._reader = Background(self)
        self._reading = threading.Event()  # set: the read under way is no longer wanted
        reads = self._reads = [self._reading]  # every read started: set when the dialog goes
        # (the lambda holds the list, not the dialog: nothing of Qt in it)
        self.destroyed.connect(lambda *_: _set_all(reads))

    @classmethod
    def for_forms(cls, forms: ConfigPanel, parent: QWidget,
                  engine_command: Callable[..., list[str]]) -> RehearseDialog | None:
        """The rehearsal of the configuration on the forms; None while they have errors."""
        config = forms.config()
        return None if config is None else cls(config, parent, engine_command=engine_command)

    def set_step(self, step: int) -> None:
        self._step.setValue(step)

    def set_signal(self, key: str) -> None:
        self._signal.setCurrentIndex(self._signal.findData(key))

    def set_worker(self, worker: int | None) -> None:
        self._worker.setValue(-1 if worker is None else worker)

    def command(self) -> list[str]:
        args = ["rehearse", str(self._config_file(self._config)), "--at", str(self._step.value()),
                "--signal", str(self._signal.currentData()), "--json"]
        if self._worker.isEnabled() and self._worker.value() >= 0:
            args += ["--worker", str(self._worker.value())]
        return self._engine_command(*args)

    def _make_job(self) -> EngineJob | None:
        self.certificate = None
        self._text.clear()
        self._reading.set()  # a previous rehearsal's curves still being read are dropped
        self.chart.clear_runs()
        self.chart.setVisible(False)
        self._curves_note.setVisible(False)
        return EngineJob(self.command(), name="the rehearsal", read=reader(Certificate),
                         ok_codes=(EXIT_OK, EXIT_FAILED), parent=self)

    def _show_result(self, result: Certificate) -> None:
        self.certificate = result
        self._text.setPlainText(sentences(result))
        if result.equivalent:
            self._show_status(f"Equivalent: the resumed run is the uninterrupted one, {result.steps} steps "
                              f"({result.tolerance}).")
        elif result.cannot_certify:
            self._show_status("Cannot certify this configuration (nothing was trained).", error=True)
        else:
            self._show_status("Not equivalent: the resumed run differs (the first difference is below).",
                              error=True)
        self._text.setStyleSheet("" if result.equivalent else ERROR_STYLE)
        self._text.moveCursor(self._text.textCursor().MoveOperation.Start)
        if result.cannot_certify is None and result.reference_run and result.rehearsed_run:
            self._read_curves(result)

    # ---- the curves ------------------------------------------------------------------------------
    def _read_curves(self, cert: Certificate) -> None:
        self._reading = cancelled = threading.Event()
        self._reads[:] = [cancelled]  # the earlier ones are set already (_make_job)
        self._curves_note.setText("Reading both runs' curves…")
        self._curves_note.setStyleSheet("")
        self._curves_note.setVisible(True)
        self._reader.run(read_all_figures, [cert.reference_run, cert.rehearsed_run], cancelled,
                         deliver=lambda figures: self._on_curves(cert, cancelled, figures),
                         failed=lambda exc: self._on_curves_failed(cancelled, exc), name="RehearsalReader")

    def _on_curves(self, cert: Certificate, cancelled: threading.Event, figures: list[RunFigures]) -> None:
        if cancelled.is_set() or cert is not self.certificate:
            return
        self._curves_note.setVisible(False)
        self.chart.show_runs(figures[0], figures[1], cert)
        self.chart.setVisible(True)
        self.curves_shown.emit()

    def _on_curves_failed(self, cancelled: threading.Event, exc: BaseException) -> None:
        if not isinstance(exc, (OSError, ValueError)):
            raise exc
        if cancelled.is_set():
            return
        self._curves_note.setText(f"The curves cannot be shown: {exc}")
        self._curves_note.setStyleSheet(ERROR_STYLE)
        self.curves_shown.emit()

    def shutdown(self) -> None:
        super().shutdown()
        self._reading.set()
        self._reader.wait()

    def _cancelled(self, job: EngineJob) -> str:
        return "Cancelled: its run was stopped with a checkpoint; the runs so far are in the run list."


def _set_all(events: list[threading.Event]) -> None:
    for event in events:
        event.set()
