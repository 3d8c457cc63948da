"""ExportDialog: choose a format and a path, export and check in an engine process, show the result.

    dialog = ExportDialog(run_dir, "tflite-int8", parent=window)
    dialog.show()                       # or dialog.set_output_path(...); dialog.start()

The export runs as ``replica-studio export RUN --format F --output P --check N --json``
through the process runner (TensorFlow and the converters never enter the window's
process); its progress lines move the progress bar and its last line is the
:class:`ExportResult`. Cancel terminates the process (it removes its temporaries and exits)
and kills it after a grace period; closing the dialog while it runs cancels and closes once
the process has ended. Signals: ``succeeded(ExportResult)`` -- the file was written, or its
check failed (``result.passed``); ``failed(str)`` -- an error or a cancel, one line;
``done()`` after either. ``log_line(str)``: the engine's stderr, for the Log tab.
"""
from __future__ import annotations

import html
from pathlib import Path
from typing import Callable

from PySide6.QtCore import Qt, QUrl, Signal
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import (
    QComboBox,
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

from gui_app.core.engine_output import EXIT_INTERRUPTED
from gui_app.core.export_result import ExportResult
from gui_app.core.formats import DEFAULT_CHECK, FORMATS, default_file_name, format_size, get_format
from gui_app.identity import app_command
from gui_app.ui.workers.process import EngineProcess

PASS_COLOR, FAIL_COLOR = "#59a14f", "#e15759"
CANCEL_GRACE_S = 10.0  # SIGTERM unwinds at the next Python line; a converter call may take a while


class ExportDialog(QDialog):
    succeeded = Signal(object)
    failed = Signal(str)
    done = Signal()
    log_line = Signal(str)

    def __init__(self, run_dir: str | Path, fmt: str = "keras", parent: QWidget | None = None,
                 folder: str | Path | None = None, engine_command: Callable[..., list[str]] = app_command) -> None:
        super().__init__(parent)
        self._run_dir = Path(run_dir)
        self._engine_command = engine_command
        self._cancelled = False
        self._close_when_done = False
        self._result: ExportResult | None = None
        self._answer: dict | None = None  # the export_result line of the running export
        self._process = EngineProcess(self)
        self._process.event.connect(self._on_event)
        self._process.log_line.connect(self.log_line)
        self._process.finished.connect(self._on_process_finished)
        self._process.start_failed.connect(self._on_failed)
        self.setWindowTitle(f"Export {self._run_dir.name}")
        self.setMinimumWidth(660)  # the report lines fit unwrapped

        self._format = QComboBox()
        for spec in FORMATS.values():
            self._format.addItem(spec.label, spec.name)
        self._format.setCurrentIndex(list(FORMATS).index(get_format(fmt).name))
        self._output = QLineEdit(str(Path(folder or Path.home()) / default_file_name(get_format(fmt),
                                                                                        self._run_dir.name)))
        browse = QToolButton(text="Browse…")
        browse.clicked.connect(self._on_browse)
        path_row = QHBoxLayout()
        path_row.addWidget(self._output, 1)
        path_row.addWidget(browse)
        self._check = QSpinBox(minimum=0, maximum=100_000, value=DEFAULT_CHECK, suffix=" test images")
        self._check.setSpecialValueText("off")
        self._check.setToolTip("Load the file back in its own runtime and compare it with the trained model "
                               "on this many test images")
        form = QFormLayout()
        form.addRow("Format", self._format)
        form.addRow("Save to", path_row)
        form.addRow("Parity check", self._check)
        self._inputs = (self._format, self._output, browse, self._check)

        self._progress = QProgressBar(minimum=0, maximum=1000, textVisible=False)
        self._status = QLabel(wordWrap=True, textFormat=Qt.TextFormat.RichText)  # _show_status escapes
        self._report = QLabel(wordWrap=True, textFormat=Qt.TextFormat.RichText)
        self._report.setOpenExternalLinks(True)
        self._report.setVisible(False)

        self._export_button = QPushButton("Export")
        self._export_button.setDefault(True)
        self._open_button = QPushButton("Open folder")
        self._open_button.setEnabled(False)
        self._close_button = QPushButton("Close")
        buttons = QDialogButtonBox()
        buttons.addButton(self._export_button, QDialogButtonBox.ButtonRole.ActionRole)
        buttons.addButton(self._open_button, QDialogButtonBox.ButtonRole.ActionRole)
        buttons.addButton(self._close_button, QDialogButtonBox.ButtonRole.RejectRole)
        self._export_button.clicked.connect(self.start)
        self._open_button.clicked.connect(self._on_open_folder)
        self._close_button.clicked.connect(self.reject)
        self._format.currentIndexChanged.connect(self._on_format_changed)

        layout = QVBoxLayout(self)
        layout.addWidget(QLabel(f"Export the trained model of run <b>{html.escape(self._run_dir.name)}</b>. "
                                f"Every format returns class probabilities.", wordWrap=True))
        layout.addLayout(form)
        layout.addWidget(self._progress)
        layout.addWidget(self._status)
        layout.addWidget(self._report)
        layout.addStretch(1)
        layout.addWidget(buttons)

    # ---- public ---------------------------------------------------------------------------
    def format_name(self) -> str:
        return self._format.currentData()

    def output_path(self) -> Path:
        return Path(self._output.text().strip()).expanduser()

    def set_output_path(self, path: str | Path) -> None:
        self._output.setText(str(path))

    def set_check(self, images: int) -> None:
        self._check.setValue(images)

    def is_running(self) -> bool:
        return self._process.is_running()

    def start(self) -> None:
        if self.is_running():
            return
        if not self._output.text().strip():
            self._show_status("Choose where to save the export.", error=True)
            return
        self._cancelled = False
        self._result = self._answer = None
        self._set_running(True)
        self._report.setVisible(False)
        self._show_status("Starting…")
        self._progress.setValue(0)
        self._process.start(self._engine_command(
            "export", str(self._run_dir), "--format", self.format_name(), "--output", str(self.output_path()),
            "--check", str(self._check.value()), "--json"), stdin=False)

    def cancel(self) -> None:
        """End the export process; it removes what it had half written (killed after a grace period)."""
        if self.is_running():
            self._cancelled = True
            self._close_button.setEnabled(False)
            self._show_status("Cancelling…")
            self._process.terminate(CANCEL_GRACE_S)

    def shutdown(self) -> None:
        """Cancel and wait until the process has ended (the window is closing: an export left
        running would be killed with the application, before it could remove its temporaries)."""
        if self.is_running():
            self.cancel()
            if not self._process.wait(int(CANCEL_GRACE_S * 1000)):
                self._process.kill()
                self._process.wait(2000)

    def reject(self) -> None:
        """Close; while an export runs, cancel it and close when the worker has stopped."""
        if self.is_running():
            self._close_when_done = True
            self.cancel()
            return
        super().reject()

    def closeEvent(self, event) -> None:  # noqa: N802 - Qt API
        if self.is_running():
            event.ignore()
            self.reject()
            return
        super().closeEvent(event)

    # ---- slots ----------------------------------------------------------------------------
    def _on_format_changed(self) -> None:
        spec = get_format(self.format_name())
        current = self.output_path()
        folder = current.parent if self._output.text().strip() else Path.home()
        self._output.setText(str(folder / default_file_name(spec, self._run_dir.name)))

    def _on_browse(self) -> None:
        spec = get_format(self.format_name())
        caption = "Save the SavedModel folder as" if spec.is_directory else "Export to"
        filter_ = "SavedModel folder (*)" if spec.is_directory else f"{spec.label} (*{spec.suffix})"
        path, _ = QFileDialog.getSaveFileName(self, caption, str(self.output_path()), filter_)
        if path:
            if not spec.is_directory and not path.endswith(spec.suffix):
                path += spec.suffix
            self._output.setText(path)

    def _on_open_folder(self) -> None:
        if self._result is not None:
            QDesktopServices.openUrl(QUrl.fromLocalFile(str(self._result.path.parent)))

    def _on_event(self, event: dict) -> None:
        kind = event.get("type")
        if kind == "progress":
            fraction = float(event.get("fraction") or 0.0)
            message = str(event.get("message") or "")
            self._progress.setValue(round(min(max(fraction, 0.0), 1.0) * 1000))
            if not self._cancelled:
                self._show_status(message + "…" if fraction < 1 else message)
        elif kind == "export_result":
            self._answer = event

    def _on_process_finished(self, code: int, crashed: bool, message: str) -> None:
        if self._cancelled:
            if self._process.killed:  # it did not unwind in time: clear its hidden temporaries
                _remove_partials(self.output_path())
            self._on_failed("Cancelled: nothing was saved.")
            return
        if self._answer is not None and code in (0, 1):  # 1: written but the parity check failed
            try:
                self._on_succeeded(ExportResult.from_dict(self._answer))
                return
            except ValueError as exc:
                message = f"the export printed a result the window cannot read ({exc})"
        if code == EXIT_INTERRUPTED and not message:
            message = "the export was interrupted"
        self._on_failed(message or ("the export process crashed" if crashed else f"the export exited with code {code}"))

    def _on_succeeded(self, result: ExportResult) -> None:
        self._result = result
        self._set_running(False)
        self._progress.setValue(1000)
        if result.passed:
            self._show_status(f"Saved {result.path.name}.")
        elif result.written:
            self._show_status(f"Saved {result.path.name}, but it FAILED its parity check.", error=True)
        else:
            self._show_status(f"{result.path.name} failed its parity check: nothing was saved.", error=True)
        self._report.setText(_report_html(result))
        self._report.setVisible(True)
        # Make room for the report at the current width (adjustSize() measures the wrapped
        # labels at a narrower width and leaves a gap above the buttons).
        height = self.layout().totalHeightForWidth(self.width()) + self.layout().spacing() * 2
        self.resize(self.width(), max(height, self.height()))
        self._open_button.setEnabled(result.written)
        self.succeeded.emit(result)
        self._finish()

    def _on_failed(self, message: str) -> None:
        self._set_running(False)
        self._progress.setValue(0)
        message = _without_prefix(message)
        self._show_status(message, error=not self._cancelled)
        self.failed.emit(message)
        self._finish()

    # ---- helpers ---------------------------------------------------------------------------
    def _finish(self) -> None:
        self.done.emit()
        if self._close_when_done:
            self._close_when_done = False
            super().reject()

    def _set_running(self, running: bool) -> None:
        for widget in self._inputs:
            widget.setEnabled(not running)
        self._export_button.setEnabled(not running)
        self._open_button.setEnabled(False)
        self._close_button.setEnabled(True)
        self._close_button.setText("Cancel" if running else "Close")

    def _show_status(self, text: str, error: bool = False) -> None:
        self._status.setText(f"<span style='color:{FAIL_COLOR}'>{html.escape(text)}</span>" if error
                             else html.escape(text))


def _without_prefix(line: str) -> str:
    """``replica-studio export: <problem>`` -> ``<problem>``: the dialog already says what it does."""
    prefix = "replica-studio export: "
    return line[len(prefix):] if line.startswith(prefix) else line


def _remove_partials(output: Path) -> None:
    """The hidden temporaries of an export killed before it could remove them
    (``.<name>.<hex>.partial<suffix>``, and its card's, beside the destination)."""
    import shutil

    for path in output.parent.glob(f".{output.name}*.partial*"):
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)


def _report_html(result: ExportResult) -> str:
    rows = [("File", f"{html.escape(str(result.path))} ({format_size(result.size_bytes)}, "
                     f"{result.seconds:.1f} s)")]
    parity = result.parity
    if parity is None:
        rows.append(("Parity check", "skipped"))
    else:
        verdict = (f"<b style='color:{PASS_COLOR}'>passed</b>" if parity.passed
                   else f"<b style='color:{FAIL_COLOR}'>failed</b>")
        rows += [
            ("Parity check", f"{verdict} on {parity.examples} test images in {html.escape(parity.runtime)} "
                             f"(needs {html.escape(parity.criterion)})"),
            ("Max abs diff", f"{parity.max_abs_diff:.2e} (mean {parity.mean_abs_diff:.2e})"),
            ("Top-1 agreement", f"{parity.top1_agreement:.2%}"),
        ]
        if parity.accuracy is not None:
            rows.append(("Accuracy", f"{parity.accuracy:.2%} (trained model {parity.reference_accuracy:.2%})"))
    if result.written:
        url = QUrl.fromLocalFile(str(result.card_path)).toString()
        rows.append(("Model card", f"<a href='{html.escape(url)}'>{html.escape(str(result.card_path))}</a>"))
    body = "".join(f"<tr><td style='padding-right:12px'><b>{k}</b></td><td>{v}</td></tr>" for k, v in rows)
    return f"<table>{body}</table>"
