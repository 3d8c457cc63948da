"""PrepareDialog (Tools -> Prepare dataset): convert the configured dataset into TFRecord shards
with ``replica-studio prepare`` in an engine process, showing its progress.

    dialog = PrepareDialog(config.dataset, parent=window)
    dialog.use_shards.connect(lambda path: ...)   # "Train on these shards" was pressed
    dialog.show()

The dialog writes the dataset section to a config file in a temporary folder, starts
``prepare CONFIG --output DIR [--shards N] --json`` through the process runner and reads its
JSON lines (``progress``, then ``prepared``); the engine's one error line is the message.
Cancel ends the process (terminate, then kill after a grace period).
Signals: ``finished_ok(dict)`` with the ``prepared`` line, ``failed(str)``, ``use_shards(str)``,
``log_line(str)`` (the engine's stderr, for the Log tab).
"""
from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Callable

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QProgressBar,
    QPushButton,
    QSpinBox,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from gui_app.core.config import DatasetConfig, RunConfig
from gui_app.identity import app_command
from gui_app.ui.workers.process import EngineProcess

ERROR_COLOR = "#c62828"
CANCEL_GRACE_S = 5.0


class PrepareDialog(QDialog):
    finished_ok = Signal(dict)
    failed = Signal(str)
    use_shards = Signal(str)
    log_line = Signal(str)

    def __init__(self, dataset: DatasetConfig, parent: QWidget | None = None, folder: str | Path | None = None,
                 engine_command: Callable[..., list[str]] = app_command) -> None:
        super().__init__(parent)
        self._dataset = dataset
        self._engine_command = engine_command
        self._process = EngineProcess(self)
        self._process.event.connect(self._on_event)
        self._process.log_line.connect(self.log_line)
        self._process.finished.connect(self._on_finished)
        self._process.start_failed.connect(lambda line: self._done(None, line))
        self._running = False
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
        return self._engine_command(*args)

    def start(self) -> None:
        if self._running or not self._output.text().strip():
            return
        command = self.command()
        self._result = None
        self._cancelled = False
        self._running = True
        for widget in (*self._inputs, self._start, self._use):
            widget.setEnabled(False)
        self._close.setText("Cancel")
        self._set_status("Starting…")
        self._progress.setValue(0)
        self._process.start(command, stdin=False)

    def is_running(self) -> bool:
        return self._running

    def _on_event(self, event: dict) -> None:
        if event.get("type") == "progress" and event.get("total"):
            self._progress.setValue(int(1000 * event["done"] / event["total"]))
            self._set_status(f"{event['done']:,} / {event['total']:,} images, "
                             f"{event.get('images_per_sec', 0):,.0f} images/s")
        elif event.get("type") == "prepared":
            self._result = event

    def _on_finished(self, code: int, _crashed: bool, line: str) -> None:
        if self._cancelled:
            self._done(None, "cancelled; the output folder may hold partial shards")
        elif code == 0 and self._result is not None:
            self._done(self._result, None)
        else:
            self._done(None, line.removeprefix("replica-studio prepare: ") or f"prepare ended with exit code {code}")

    def _done(self, result: dict | None, error: str | None) -> None:
        if not self._running:
            return
        self._running = False
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
        if self._running:  # Cancel: the process leaves a partial folder behind
            self._cancel()
            return
        self.reject()

    def _cancel(self) -> None:
        self._cancelled = True
        self._process.terminate(CANCEL_GRACE_S)
        if not self._process.wait(int(CANCEL_GRACE_S * 1000) + 1000):
            self._done(None, "cancelled; the output folder may hold partial shards")

    def reject(self) -> None:  # Escape, and the window closing
        if self._running:
            self._cancel()
        super().reject()

    def closeEvent(self, event) -> None:  # noqa: N802 - Qt's name
        if self._running:
            self._cancel()
        self._tmp.cleanup()
        super().closeEvent(event)

    def _set_status(self, text: str, error: bool = False) -> None:
        self._status.setText(text)
        self._status.setStyleSheet(f"color: {ERROR_COLOR};" if error else "")


def open_prepare_dialog(parent: QWidget, dataset_form,
                        engine_command: Callable[..., list[str]] = app_command) -> PrepareDialog:
    """Tools -> Prepare dataset: the dialog over the form's dataset; "Train on these shards"
    switches the form to the written shards, at the image shape their manifest records."""
    import dataclasses

    current = dataset_form.validate() or DatasetConfig()
    dialog = PrepareDialog(current, parent, folder=dataset_form.last_dir or None, engine_command=engine_command)

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
    dialog.open()  # window-modal, not blocking
    return dialog
