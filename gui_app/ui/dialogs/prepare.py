"""PrepareDialog (Tools -> Prepare dataset): convert the configured dataset into TFRecord shards
with ``replica-studio prepare`` in an engine process, showing its progress.

    dialog = PrepareDialog(config.dataset, parent=window)
    dialog.use_shards.connect(lambda path: ...)   # "Train on these shards" was pressed
    dialog.show()

The dialog writes the dataset section to a config file in a temporary folder, starts
``prepare CONFIG --output DIR [--shards N] --json`` with a QProcess and reads its JSON lines
(``progress``, then ``prepared``); stderr's last line is the error. Cancel kills the process.
Signals: ``finished_ok(dict)`` with the ``prepared`` line, ``failed(str)``, ``use_shards(str)``.
"""
from __future__ import annotations

import json
import tempfile
from pathlib import Path

from PySide6.QtCore import QProcess, QProcessEnvironment, Qt, Signal
from PySide6.QtWidgets import (QDialog, QDialogButtonBox, QFileDialog, QFormLayout, QHBoxLayout, QLabel, QLineEdit,
                               QProgressBar, QPushButton, QSpinBox, QToolButton, QVBoxLayout, QWidget)

from gui_app.core.config import DatasetConfig, RunConfig
from gui_app.identity import app_command, app_env

ERROR_COLOR = "#c62828"


class PrepareDialog(QDialog):
    finished_ok = Signal(dict)
    failed = Signal(str)
    use_shards = Signal(str)

    def __init__(self, dataset: DatasetConfig, parent: QWidget | None = None, folder: str | Path | None = None) -> None:
        super().__init__(parent)
        self._dataset = dataset
        self._process: QProcess | None = None
        self._stdout = b""
        self._stderr = b""
        self._result: dict | None = None
        self._cancelled = False
        self._tmp = tempfile.TemporaryDirectory(prefix="replica-prepare-")
        self.setWindowTitle("Prepare dataset as TFRecord shards")
        self.setMinimumWidth(560)

        source = dataset.path or dataset.tfds_name or dataset.name
        self._source = QLabel(f"{dataset.name}: {source}", wordWrap=True)
        default = Path(folder or Path.home()) / f"{Path(str(source)).name or dataset.name}-tfrecord"
        self._output = QLineEdit(str(default))
        browse = QToolButton(text="Browse…")
        browse.clicked.connect(self._on_browse)
        row = QHBoxLayout()
        row.addWidget(self._output, 1)
        row.addWidget(browse)
        self._shards = QSpinBox(minimum=0, maximum=100_000)
        self._shards.setSpecialValueText("automatic (about 100 MB each)")
        form = QFormLayout()
        form.addRow("Dataset", self._source)
        form.addRow("Write to", row)
        form.addRow("Training shards", self._shards)
        self._inputs = (self._output, browse, self._shards)

        self._progress = QProgressBar(minimum=0, maximum=1000)
        self._status = QLabel(wordWrap=True)
        self._start = QPushButton("Prepare")
        self._start.setDefault(True)
        self._use = QPushButton("Train on these shards")
        self._use.setEnabled(False)
        self._close = QPushButton("Close")
        buttons = QDialogButtonBox()
        for button in (self._start, self._use, self._close):
            buttons.addButton(button, QDialogButtonBox.ButtonRole.ActionRole)
        self._start.clicked.connect(self.start)
        self._use.clicked.connect(self._on_use)
        self._close.clicked.connect(self._on_close)

        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(self._progress)
        layout.addWidget(self._status)
        layout.addWidget(buttons)

    # ---- the process ---------------------------------------------------------------------
    def command(self) -> list[str]:
        config = Path(self._tmp.name) / "prepare.json"
        RunConfig(dataset=self._dataset).save(config)
        args = ["prepare", str(config), "--output", self._output.text().strip(), "--json"]
        if self._shards.value():
            args += ["--shards", str(self._shards.value())]
        return app_command(*args)

    def start(self) -> None:
        if self._process is not None or not self._output.text().strip():
            return
        program, *args = self.command()
        self._stdout = self._stderr = b""
        self._result = None
        self._cancelled = False
        process = QProcess(self)
        env = QProcessEnvironment()
        for key, value in app_env().items():
            env.insert(key, value)
        process.setProcessEnvironment(env)
        process.readyReadStandardOutput.connect(self._on_stdout)
        process.readyReadStandardError.connect(self._on_stderr)
        process.finished.connect(self._on_finished)
        process.errorOccurred.connect(self._on_error)
        self._process = process
        for widget in (*self._inputs, self._start, self._use):
            widget.setEnabled(False)
        self._close.setText("Cancel")
        self._set_status("Starting…")
        self._progress.setValue(0)
        process.start(program, args)

    def is_running(self) -> bool:
        return self._process is not None

    def _on_stdout(self) -> None:
        self._stdout += bytes(self._process.readAllStandardOutput())
        *lines, self._stdout = self._stdout.split(b"\n")
        for line in lines:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if event.get("type") == "progress" and event.get("total"):
                self._progress.setValue(int(1000 * event["done"] / event["total"]))
                self._set_status(f"{event['done']:,} / {event['total']:,} images, "
                                 f"{event.get('images_per_sec', 0):,.0f} images/s")
            elif event.get("type") == "prepared":
                self._result = event

    def _on_stderr(self) -> None:
        self._stderr += bytes(self._process.readAllStandardError())

    def _on_error(self, error: QProcess.ProcessError) -> None:
        if error == QProcess.ProcessError.FailedToStart:
            self._done(None, "the engine process could not start")

    def _on_finished(self, code: int, _status: QProcess.ExitStatus) -> None:
        self._on_stdout()
        if self._cancelled:
            self._done(None, "cancelled; the output folder may hold partial shards")
        elif code == 0 and self._result is not None:
            self._done(self._result, None)
        else:
            lines = [line for line in self._stderr.decode("utf-8", "replace").splitlines() if line.strip()]
            errors = [line for line in lines if line.startswith("replica-studio prepare:")]
            message = (errors or lines or [f"prepare ended with exit code {code}"])[-1]
            self._done(None, message.removeprefix("replica-studio prepare: "))

    def _done(self, result: dict | None, error: str | None) -> None:
        if self._process is None:
            return
        self._process.deleteLater()
        self._process = None
        for widget in (*self._inputs, self._start):
            widget.setEnabled(True)
        self._close.setText("Close")
        if result is not None:
            counts = result["counts"]
            self._progress.setValue(1000)
            self._set_status(f"Wrote {counts['train']:,} training and {counts['test']:,} test images in "
                             f"{result['shards']} shards to {result['output']} "
                             f"({result['images_per_sec']:,.0f} images/s).")
            self._use.setEnabled(True)
            self.finished_ok.emit(result)
        else:
            self._set_status(error or "cancelled", error=True)
            self.failed.emit(error or "cancelled")

    # ---- buttons ---------------------------------------------------------------------------
    def _on_browse(self) -> None:
        path = QFileDialog.getExistingDirectory(self, "Folder for the shards", str(Path(self._output.text()).parent))
        if path:
            self._output.setText(path)

    def _on_use(self) -> None:
        if self._result is not None:
            self.use_shards.emit(self._result["output"])
            self.accept()

    def _on_close(self) -> None:
        if self._process is not None:  # Cancel: the process leaves a partial folder behind
            self._cancel()
            return
        self.reject()

    def _cancel(self) -> None:
        self._cancelled = True
        self._process.kill()
        if not self._process.waitForFinished(3000):
            self._done(None, "cancelled; the output folder may hold partial shards")

    def closeEvent(self, event) -> None:  # noqa: N802 - Qt's name
        if self._process is not None:
            self._cancel()
        self._tmp.cleanup()
        super().closeEvent(event)

    def _set_status(self, text: str, error: bool = False) -> None:
        self._status.setText(text)
        self._status.setStyleSheet(f"color: {ERROR_COLOR};" if error else "")


def open_prepare_dialog(parent: QWidget, dataset_form) -> PrepareDialog:
    """Tools -> Prepare dataset: the dialog over the form's dataset; "Train on these shards"
    switches the form to the written shards, at the image shape their manifest records."""
    import dataclasses

    current = dataset_form.validate() or DatasetConfig()
    dialog = PrepareDialog(current, parent, folder=dataset_form.last_dir or None)

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
    dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
    dialog.show()
    return dialog
