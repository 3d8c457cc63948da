"""ExportDialog: choose a format and a path, export and check in an engine process, show the result.

    dialog = ExportDialog(run_dir, "tflite-int8", parent=window)
    dialog.show()                       # the user picks the path and presses Export; or dialog.start()

The export is ``replica-studio export RUN --format F --output P --check N --json``, an engine
job (gui_app.ui.dialogs.job_dialog: TensorFlow and the converters never enter the window's
process); its progress lines move the progress bar and its last line is the
:class:`ExportResult`. Cancel terminates the process (it removes its temporaries and exits)
and kills it after a grace period, then removes what a killed export left; closing the dialog
while it runs cancels and closes once the process has ended. ``succeeded(ExportResult)``: the
file was written, or its check failed (``result.passed``); ``failed(str)``: an error or a
cancel, one line.
"""
from __future__ import annotations

import html
import shutil
from pathlib import Path
from typing import Callable

from PySide6.QtCore import Qt, QUrl
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import (
    QComboBox,
    QFileDialog,
    QFormLayout,
    QLabel,
    QLineEdit,
    QSpinBox,
    QWidget,
)

from gui_app.core.engine_output import EXIT_FAILED, EXIT_OK
from gui_app.core.export_result import ExportResult
from gui_app.core.formats import DEFAULT_CHECK, FORMATS, default_file_name, format_size, get_format
from gui_app.core.rundir import MODEL_FILE
from gui_app.identity import app_command
from gui_app.ui.colors import ERROR_COLOR
from gui_app.ui.dialogs.job_dialog import JobDialog, browse_row
from gui_app.ui.screen_fit import largest_size
from gui_app.ui.workers.engine_job import EngineJob

PASS_COLOR = "#59a14f"


class ExportDialog(JobDialog):
    cancel_grace_s = 10.0  # SIGTERM unwinds at the next Python line; a converter call may take a while

    def __init__(self, run_dir: str | Path, fmt: str = "keras", parent: QWidget | None = None,
                 folder: str | Path | None = None, engine_command: Callable[..., list[str]] = app_command,
                 trained: bool | None = None) -> None:
        """``trained``: whether the run has its trained model (None: look for it in ``run_dir``;
        a run on an SSH host says it from its host)."""
        super().__init__(parent, engine_command, run_label="Export")
        self._run_dir = Path(run_dir)
        self._result: ExportResult | None = None
        self.setWindowTitle(f"Export {self._run_dir.name}")
        self.setMinimumWidth(660)  # the report lines fit unwrapped

        self._format = QComboBox()
        for spec in FORMATS.values():
            self._format.addItem(spec.label, spec.name)
        self._format.setCurrentIndex(list(FORMATS).index(get_format(fmt).name))
        self._output = QLineEdit(str(Path(folder or Path.home()) / default_file_name(get_format(fmt),
                                                                                        self._run_dir.name)))
        self._check = QSpinBox(minimum=0, maximum=100_000, value=DEFAULT_CHECK, suffix=" test images")
        self._check.setSpecialValueText("off")
        self._check.setToolTip("Load the file back in its own runtime and compare it with the trained model "
                               "on this many test images")
        row, browse = browse_row(self._output, self._on_browse)
        form = QFormLayout()
        form.addRow("Format", self._format)
        form.addRow("Save to", row)
        form.addRow("Parity check", self._check)
        self._inputs = (self._format, self._output, browse, self._check)
        trained = (self._run_dir / MODEL_FILE).is_file() if trained is None else trained
        what = ("the trained model" if trained
                else "the last checkpoint (the run stopped before its end)")
        self.form_area.addWidget(QLabel(f"Export {what} of run <b>{html.escape(self._run_dir.name)}</b>. "
                                        f"Every format returns class probabilities.", wordWrap=True))
        self.form_area.addLayout(form)

        self._report = QLabel(wordWrap=True, textFormat=Qt.TextFormat.RichText)
        self._report.setOpenExternalLinks(True)
        self._report.setVisible(False)
        self.result_area.addWidget(self._report)
        self.result_area.addStretch(1)

        self._open_button = self._add_result_button("Open folder", self._on_open_folder)
        self._format.currentIndexChanged.connect(self._on_format_changed)
        # A result speaks of the format, file and check it was made with: it goes when one changes.
        self._output.textChanged.connect(self._on_inputs_changed)
        self._check.valueChanged.connect(self._on_inputs_changed)

    # ---- public ---------------------------------------------------------------------------
    def format_name(self) -> str:
        return self._format.currentData()

    def output_path(self) -> Path:
        return Path(self._output.text().strip()).expanduser()

    # ---- the job ---------------------------------------------------------------------------
    def _make_job(self) -> EngineJob | None:
        if not self._output.text().strip():
            self._show_status("Choose where to save the export.", error=True)
            return None
        self._result = None
        self._report.setVisible(False)
        command = self._engine_command("export", str(self._run_dir), "--format", self.format_name(),
                                       "--output", str(self.output_path()), "--check", str(self._check.value()),
                                       "--json")
        # Exit 1 with a result: written (or not), but the parity check failed; the report says so.
        return EngineJob(command, name="the export", answer="export_result", read=ExportResult.from_dict,
                         ok_codes=(EXIT_OK, EXIT_FAILED), parent=self)

    def _show_result(self, result: ExportResult) -> None:
        self._result = result
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
        layout = self.layout()
        assert layout is not None  # the dialog was built with one
        height = layout.totalHeightForWidth(self.width()) + layout.spacing() * 2
        self.resize(self.width(), max(min(height, largest_size(self).height()), self.height()))
        self._open_button.setEnabled(result.written)

    def _cancelled(self, job: EngineJob) -> str:
        if job.killed:  # it did not unwind in time: clear its hidden temporaries
            _remove_partials(self.output_path())
        return "Cancelled: nothing was saved."

    # ---- slots ----------------------------------------------------------------------------
    def _on_format_changed(self) -> None:
        spec = get_format(self.format_name())
        current = self.output_path()
        folder = current.parent if self._output.text().strip() else Path.home()
        self._output.setText(str(folder / default_file_name(spec, self._run_dir.name)))
        self._on_inputs_changed()  # the same file name (a folder typed by hand) changes no text

    def _on_inputs_changed(self) -> None:
        """What was shown of the last export (its report, its error line, Open folder) is about
        other inputs now: the ONNX report must not stay under "int8" as if it were its result."""
        if self.is_running():
            return
        self._result = None
        self._report.clear()
        self._report.setVisible(False)
        self._open_button.setEnabled(False)
        self._progress.setValue(0)
        self._show_status("")

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


def _remove_partials(output: Path) -> None:
    """The hidden temporaries of an export killed before it could remove them
    (``.<name>.<hex>.partial<suffix>``, and its card's, beside the destination)."""
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
                   else f"<b style='color:{ERROR_COLOR}'>failed</b>")
        rows += [
            ("Parity check", f"{verdict} on {parity.examples} test images in {html.escape(parity.runtime)} "
                             f"(needs {html.escape(parity.criterion)})"),
            ("Max abs diff", f"{parity.max_abs_diff:.2e} (mean {parity.mean_abs_diff:.2e})"),
            ("Top-1 agreement", f"{parity.top1_agreement:.2%}"),
        ]
        accuracy = parity.accuracy_text()
        if accuracy:
            rows.append(("Accuracy", f"{html.escape(accuracy)}<br><i>a sample of the test set: the run's test "
                                     f"accuracy is over all of it</i>"))
    if result.written:
        url = QUrl.fromLocalFile(str(result.card_path)).toString()
        rows.append(("Model card", f"<a href='{html.escape(url)}'>{html.escape(str(result.card_path))}</a>"))
    body = "".join(f"<tr><td style='padding-right:12px'><b>{k}</b></td><td>{v}</td></tr>" for k, v in rows)
    return f"<table>{body}</table>"
