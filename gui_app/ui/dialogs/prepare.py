"""PrepareDialog (Tools -> Prepare dataset): convert the configured dataset into TFRecord shards
with ``replica-studio prepare`` in an engine process, showing its progress.

    dialog = PrepareDialog(config.dataset, parent=window)
    dialog.use_shards.connect(lambda path: ...)   # "Train on these shards" was pressed
    dialog.show()

The dialog writes the dataset section to a config file in a temporary folder and runs
``prepare CONFIG --output DIR [--shards N] --json`` as an engine job
(gui_app.ui.dialogs.job_dialog): its ``progress`` lines move the bar, its ``prepared`` line is
the result (``succeeded(Prepared)``, gui_app.core.answers). Cancel ends the process (terminate, then kill after a grace
period); the output folder may then hold partial shards. ``use_shards(str)``: "Train on these
shards" was pressed; :meth:`PrepareDialog.for_forms` points the dataset form at them.
"""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QFileDialog,
    QFormLayout,
    QLabel,
    QLineEdit,
    QSpinBox,
    QWidget,
)

from gui_app.core.answers import Prepared, reader
from gui_app.core.config import DatasetConfig, RunConfig
from gui_app.identity import app_command
from gui_app.ui.dialogs.job_dialog import JobDialog, browse_row
from gui_app.ui.workers.engine_job import EngineJob

if TYPE_CHECKING:
    from gui_app.ui.config.config_panel import ConfigPanel


class PrepareDialog(JobDialog):
    use_shards = Signal(str)

    def __init__(self, dataset: DatasetConfig, parent: QWidget | None = None, folder: str | Path | None = None,
                 engine_command: Callable[..., list[str]] = app_command) -> None:
        super().__init__(parent, engine_command, run_label="Prepare")
        self._dataset = dataset
        self._result: Prepared | None = None
        self.setWindowTitle("Prepare dataset as TFRecord shards")
        self.setMinimumWidth(560)

        source = dataset.path or dataset.tfds_name or dataset.name
        default = Path(folder or Path.home()) / f"{Path(str(source)).name or dataset.name}-tfrecord"
        self._output = QLineEdit(str(default))
        self._shards = QSpinBox(minimum=0, maximum=100_000)
        self._shards.setSpecialValueText("automatic (about 100 MB each)")
        row, browse = browse_row(self._output, self._on_browse)
        form = QFormLayout()
        form.addRow("Dataset", QLabel(f"{dataset.name}: {source}", wordWrap=True))
        form.addRow("Write to", row)
        form.addRow("Training shards", self._shards)
        self._inputs = (self._output, browse, self._shards)
        self.form_area.addLayout(form)

        self._use = self._add_result_button("Train on these shards", self._on_use)

    @classmethod
    def for_forms(cls, forms: ConfigPanel, parent: QWidget,
                  engine_command: Callable[..., list[str]]) -> PrepareDialog:
        """The dialog over the dataset form's section; "Train on these shards" switches the form
        to the written shards, at the image shape their manifest records."""
        dataset_form = forms.dataset
        current = dataset_form.validate() or DatasetConfig()
        dialog = cls(current, parent, folder=dataset_form.last_dir or None, engine_command=engine_command)

        def use(path: str) -> None:
            size, color = current.image_size, current.color_mode
            try:  # train at the size the shards were written at
                h, w, c = json.loads((Path(path) / "manifest.json").read_text(encoding="utf-8"))["image_shape"]
                size, color = (max(8, int(h)), max(8, int(w))), "grayscale" if int(c) == 1 else "rgb"
            except (OSError, ValueError, KeyError, TypeError):
                pass
            dataset_form.set_config_section(dataclasses.replace(
                current, name="tfrecord", path=path, test_path=None, label_offset=0, tfds_name=None, data_dir=None,
                image_size=size, color_mode=color))

        dialog.use_shards.connect(use)
        return dialog

    def command(self) -> list[str]:
        args = ["prepare", str(self._config_file(RunConfig(dataset=self._dataset))),
                "--output", self._output.text().strip(), "--json"]
        if self._shards.value():
            args += ["--shards", str(self._shards.value())]
        return self._engine_command(*args)

    # ---- the job ---------------------------------------------------------------------------
    def _make_job(self) -> EngineJob | None:
        if not self._output.text().strip():
            self._show_status("Choose a folder for the shards.", error=True)
            return None
        self._result = None
        return EngineJob(self.command(), name="prepare", answer=Prepared.TYPE, read=reader(Prepared), parent=self)

    def _show_result(self, result: Prepared) -> None:
        self._result = result
        self._show_status(f"Wrote {result.train:,} training and {result.test:,} test images in "
                          f"{result.shards} shards to {result.output} ({result.images_per_sec:,.0f} images/s).")
        self._use.setEnabled(True)

    def _cancelled(self, job: EngineJob) -> str:
        return "Cancelled: the output folder may hold partial shards."

    # ---- buttons ---------------------------------------------------------------------------
    def _on_browse(self) -> None:
        path = QFileDialog.getExistingDirectory(self, "Folder for the shards", str(Path(self._output.text()).parent))
        if path:
            self._output.setText(path)

    def _on_use(self) -> None:
        if self._result is not None:
            self.use_shards.emit(self._result.output)
            self.accept()
