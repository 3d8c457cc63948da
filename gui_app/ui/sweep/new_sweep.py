"""Tools -> New sweep: a sweep of the run on the forms (docs/sweeps.md, "In the window").

The forms' configuration is the base; the rows say which settings vary and how; method, metric,
pruner and budget are the sweep file's. Every change is checked at once by the sweep file's own
parsing (``SweepConfig.from_dict``: the CLI's one-line errors, naming the key) and Start stays off
until it passes. Start writes the sweep file and runs ``sweep SWEEP.json --detach``: the sweep is
a process of its own session, which closing the window leaves running; ``started(sweep_dir)``
then says where its folder is. "Run trials on" lists this computer and the SSH hosts of Tools ->
Hosts (core/ssh_hosts.py): the sweep spreads its trials over the ones ticked. "Run trials as Slurm jobs"
sets the sweep file's ``slurm`` key instead (each trial one job; a partition and a time limit, the
rest the cluster's defaults): its fields, like the threshold pruner's figure, are checked by the
same parsing (core/sweep_slurm.py), so the dialog and the CLI refuse a value in the same words.

A sweep trains many runs, so what one trial costs is said before Start: its epochs (editable
here; at most :data:`DEFAULT_EPOCHS` unless asked, whatever the forms were left at), its steps
and the steps of the whole sweep. A form left at 300 epochs started 4 trials of 6,000 steps each
without a word.
"""
from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any, Callable

from PySide6.QtCore import QSize, Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from gui_app.core.config import RunConfig
from gui_app.core.config_json import ConfigError
from gui_app.core.ssh_hosts import HostsFileError, load_hosts
from gui_app.core.sweep_config import LOCAL, MAX_PARALLEL, MAX_TRIALS, SweepConfig
from gui_app.ui.colors import ERROR_STYLE
from gui_app.ui.screen_fit import ScreenFit
from gui_app.ui.sweep.figures import METRICS
from gui_app.ui.sweep.parameter_table import ParameterTable
from gui_app.ui.workers.detached_start import DetachedStart

METHODS = {"tpe": "TPE (Optuna's default)", "random": "Random", "grid": "Grid"}
DEFAULT_EPOCHS = 10  # a trial's epochs when the forms say more: a sweep trains trials x this
EPOCHS_KEY = "training.epochs"
PRUNERS = {"none": "None", "median": "Median", "hyperband": "Hyperband",
           "threshold": "Threshold: a trial worse than a figure"}


def _number_or_text(text: str) -> Any:
    """A field's number, or what was typed (None when empty) for the sweep file's parsing to refuse
    in its own words: the dialog keeps no rule of its own."""
    text = text.strip()
    if not text:
        return None
    try:
        return float(text)
    except ValueError:
        return text


def _combo(items: dict[str, str]) -> QComboBox:
    box = QComboBox()
    for value, text in items.items():
        box.addItem(text, value)
    return box


class NewSweepDialog(QDialog):
    started = Signal(str)  # the new sweep's folder
    log_line = Signal(str)

    def __init__(self, base: RunConfig, sweeps_dir: Path, engine_command: Callable[..., list[str]],
                 parent: QWidget | None = None, train_examples: int | None = None) -> None:
        """``train_examples``: the training set's size from the forms' dataset check (None while
        it is not known): what makes an epoch a number of steps."""
        super().__init__(parent)
        self.setWindowTitle("New sweep")
        self.base, self.sweeps_dir, self._engine_command = base, Path(sweeps_dir), engine_command
        self._train_examples = train_examples
        self.sweep: SweepConfig | None = None  # what the fields say, when it passes
        self._job: DetachedStart | None = None
        self._tmp: tempfile.TemporaryDirectory | None = None

        intro = QLabel(f"Each trial is a run of the configuration on the forms ({base.dataset.name}, "
                       f"{base.model.name}, global batch {base.training.global_batch_size}) with the settings "
                       f"below varied.", wordWrap=True)
        self.rows = ParameterTable()
        self.method_box, self.metric_box, self.pruner_box = _combo(METHODS), _combo(METRICS), _combo(PRUNERS)
        self.direction_box = _combo({"maximize": "higher is better", "minimize": "lower is better"})
        self.trials_box = QSpinBox(minimum=1, maximum=MAX_TRIALS, value=8)
        self.epochs_box = QSpinBox(minimum=1, maximum=100_000, value=min(base.training.epochs, DEFAULT_EPOCHS))
        self.epochs_box.setToolTip(f"The forms say {base.training.epochs}; every trial trains this many")
        self.cost = QLabel(wordWrap=True)  # what a trial and the sweep train, in steps
        self.time_limit_box = QSpinBox(minimum=0, maximum=100_000, value=0, suffix=" min")
        self.time_limit_box.setSpecialValueText("none")
        self.parallel_box = QSpinBox(minimum=1, maximum=MAX_PARALLEL, value=1)
        self.parallel_box.setToolTip("Trials that train at once; with NVIDIA GPUs each trial gets one; as "
                                     "Slurm jobs, the jobs the sweep keeps in Slurm's queue at once")
        self.threshold_edit = QLineEdit(placeholderText="the metric a trial must reach, e.g. 0.5")
        self.threshold_edit.setToolTip("After the first epoch, a trial whose metric is worse than this stops "
                                       "(below it when higher is better, above it when lower is)")
        self.slurm_box = QCheckBox("Run trials as Slurm jobs (one job a trial; Slurm places them)")
        self.slurm_box.setToolTip("Start the sweep on the cluster's login node, the sweeps folder on its shared "
                                  "filesystem; the base must be multi_worker_mirrored (Worker processes)")
        self.partition_edit = QLineEdit(placeholderText="the cluster's default")
        self.slurm_time_edit = QLineEdit(placeholderText="the cluster's default")
        self.slurm_time_edit.setToolTip("Each trial's job time limit, in Slurm's format: minutes, H:MM:SS or "
                                        "D-HH:MM; near it the trial checkpoints and its job is requeued")
        form = QFormLayout()
        form.addRow("Search", self.method_box)
        form.addRow("Metric", self.metric_box)
        form.addRow("", self.direction_box)
        form.addRow("Stop poor trials early", self.pruner_box)
        form.addRow("Threshold", self.threshold_edit)
        form.addRow("Trials", self.trials_box)
        form.addRow("Epochs per trial", self.epochs_box)
        form.addRow("", self.cost)
        form.addRow("Time budget", self.time_limit_box)
        form.addRow("Trials at once", self.parallel_box)
        form.addRow("Run trials on", self._places_row())
        form.addRow("", self.slurm_box)
        form.addRow("Slurm partition", self.partition_edit)
        form.addRow("Slurm time limit", self.slurm_time_edit)
        self.error = QLabel(wordWrap=True, textFormat=Qt.TextFormat.PlainText)
        self.error.setStyleSheet(ERROR_STYLE)
        self.start_button = QPushButton("Start sweep")
        self.start_button.setDefault(True)
        self.start_button.clicked.connect(self.start)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Cancel)
        buttons.addButton(self.start_button, QDialogButtonBox.ButtonRole.AcceptRole)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(intro)
        layout.addWidget(self.rows, 1)
        layout.addLayout(form)
        layout.addWidget(self.error)
        layout.addWidget(buttons)

        self.rows.changed.connect(self.check)
        self.metric_box.currentIndexChanged.connect(self._metric_changed)
        for box in (self.method_box, self.pruner_box, self.direction_box):
            box.currentIndexChanged.connect(self.check)
        for spin in (self.trials_box, self.epochs_box, self.time_limit_box, self.parallel_box):
            spin.valueChanged.connect(self.check)
        for place in (*self.places.values(), self.slurm_box):
            place.toggled.connect(self.check)
        for edit in (self.threshold_edit, self.partition_edit, self.slurm_time_edit):
            edit.textChanged.connect(self.check)
        self.rows.add_row()
        ScreenFit(self, QSize(860, 640))  # the Slurm and threshold rows: the table keeps room

    def _places_row(self) -> QWidget:
        """A tick for this computer (ticked) and one for each SSH host (Tools -> Hosts)."""
        row = QWidget()
        layout = QHBoxLayout(row)
        layout.setContentsMargins(0, 0, 0, 0)
        this_computer = QCheckBox("This computer")
        this_computer.setChecked(True)
        self.places = {LOCAL: this_computer}
        try:
            hosts, note = list(load_hosts()), "add SSH hosts with Tools -> Hosts…"
        except HostsFileError as exc:  # the window's Hosts dialog says what is wrong with the file
            hosts, note = [], str(exc)
        for name in hosts:
            self.places[name] = QCheckBox(name)
            self.places[name].setToolTip(f"Trials on {name} run there with train --host {name}; their run "
                                         f"directories stay there")
        for box in self.places.values():
            layout.addWidget(box)
        if not hosts:
            label = QLabel(note)
            label.setEnabled(False)
            layout.addWidget(label)
        layout.addStretch(1)
        return row

    def sweep_dict(self) -> dict[str, Any]:
        """The sweep file the fields describe."""
        base = self.base.replace(training={"epochs": self.epochs_box.value()})
        pruner = self.pruner_box.currentData()
        data = {"base": base.to_dict(), "parameters": self.rows.parameters(),
                "metric": self.metric_box.currentData(), "direction": self.direction_box.currentData(),
                "method": self.method_box.currentData(), "pruner": pruner,
                "trials": self.trials_box.value(), "parallel": self.parallel_box.value(),
                "time_limit": self.time_limit_box.value() * 60 or None}
        if pruner == "threshold":
            data["pruner_threshold"] = _number_or_text(self.threshold_edit.text())
        if self.slurm_box.isChecked():  # Slurm places the trials: no hosts (the file's parsing refuses them)
            data["slurm"] = {"partition": self.partition_edit.text().strip() or None,
                             "time": self.slurm_time_edit.text().strip() or None}
        else:
            data["hosts"] = [name for name, box in self.places.items() if box.isChecked()]
        return data

    def check(self) -> SweepConfig | None:
        """Check the fields as the CLI checks a sweep file; the error (one line) shows under them."""
        self.threshold_edit.setEnabled(self.pruner_box.currentData() == "threshold")
        slurm = self.slurm_box.isChecked()
        for widget in (self.partition_edit, self.slurm_time_edit):
            widget.setEnabled(slurm)
        for place in self.places.values():
            place.setEnabled(not slurm)
        try:
            self.sweep = SweepConfig.from_dict(self.sweep_dict())
        except ConfigError as exc:
            self.sweep = None
            self.error.setText(str(exc))
        else:
            self.error.setText("")
        self.cost.setText(self._cost_text())
        self.start_button.setEnabled(self.sweep is not None and self._job is None)
        return self.sweep

    def _cost_text(self) -> str:
        """``22 steps per epoch (1,438 examples / 64) × 10 epochs (the forms say 300) = 220 steps per
        trial; 8 trials: 1,760 steps in all.``: what Start sets off, before it is pressed."""
        epochs, base_epochs = self.epochs_box.value(), self.base.training.epochs
        trials = self.sweep.trial_budget if self.sweep is not None else self.trials_box.value()
        if EPOCHS_KEY in self.rows.parameters():
            return "The epochs vary from trial to trial (a row above)."
        forms = f" (the forms say {base_epochs})" if epochs != base_epochs else ""
        batch = self.base.training.global_batch_size
        if not self._train_examples:
            return f"{epochs} epochs per trial{forms} × {trials} trials; the steps show once the dataset is checked."
        per_epoch = max(self._train_examples // batch, 1)
        per_trial = per_epoch * epochs
        return (f"{per_epoch:,} steps per epoch ({self._train_examples:,} examples / {batch}) × {epochs} epochs"
                f"{forms} = {per_trial:,} steps per trial; {trials} trials: {per_trial * trials:,} steps in all.")

    def _metric_changed(self) -> None:
        self.direction_box.setCurrentIndex(self.direction_box.findData(
            "minimize" if self.metric_box.currentData() == "val_loss" else "maximize"))
        self.check()

    def start(self) -> None:
        sweep = self.check()
        if sweep is None or self._job is not None:
            return
        self._tmp = tempfile.TemporaryDirectory(prefix="replica-studio-sweep-")
        name = f"{self.base.dataset.name}-{self.base.model.name}"
        path = Path(self._tmp.name) / f"{name}.json"  # the folder is named after the file
        path.write_text(sweep.to_json() + "\n", encoding="utf-8")
        self.start_button.setEnabled(False)
        self.error.setStyleSheet("")
        self.error.setText("Starting the sweep…")
        self._job = DetachedStart(self._engine_command("sweep", str(path), "--detach", "--sweeps-dir",
                                                       str(self.sweeps_dir)), parent=self)
        self._job.name = "the sweep"
        (self._job.on_result(self._on_started).on_failure(self._on_failed).on_log_line(self.log_line)
            .on_finished(self._on_finished).start())

    def _on_started(self, sweep_dir: str) -> None:
        self.started.emit(sweep_dir)
        self.accept()

    def _on_failed(self, message: str) -> None:
        self.error.setStyleSheet(ERROR_STYLE)
        self.error.setText(message)

    def _on_finished(self) -> None:
        self._job = None
        if self._tmp is not None:
            self._tmp.cleanup()  # the sweep folder holds its own copy (sweep.json)
            self._tmp = None
        self.start_button.setEnabled(self.sweep is not None)
