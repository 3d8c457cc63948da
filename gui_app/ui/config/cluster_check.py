"""ClusterCheck: the strategy form's **Check cluster** button and what ``preflight`` answered.

The window never runs TensorFlow: the check is ``replica-studio preflight CONFIG --json`` as an
engine job (gui_app/ui/workers/engine_job.py), where the forms' jobs run (this computer, or the
Run on host with ``--host``), with the forms' config in a temporary file. Its JSON carries the
table the command prints; a refused cluster (exit 2) carries its problem lines too, shown in red.
"""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Callable

from PySide6.QtCore import Qt
from PySide6.QtGui import QFontDatabase
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPlainTextEdit, QPushButton, QVBoxLayout, QWidget

from gui_app.core.config import RunConfig
from gui_app.core.engine_output import EXIT_BAD_INPUT, EXIT_OK
from gui_app.ui.colors import WARNING_STYLE
from gui_app.ui.workers.engine_job import EngineJob

CHECK_TIMEOUT_S = 600.0  # the cheap checks take seconds; the canary starts every worker's TensorFlow
CHECKING = "Checking every worker, then all-reducing over the cluster…"
NOT_READY = "The forms do not describe a valid configuration yet."


class ClusterCheck(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        column = QVBoxLayout(self)
        column.setContentsMargins(0, 0, 0, 0)
        row = QHBoxLayout()
        self.button = QPushButton("Check cluster")
        self.button.setToolTip("Check every worker (versions, port, addresses, dataset, runs folder, clock) and "
                               "all-reduce over the cluster, before training: replica-studio preflight")
        row.addWidget(self.button)
        row.addStretch(1)
        column.addLayout(row)
        self.problems = QLabel()
        self.problems.setWordWrap(True)
        self.problems.setStyleSheet(WARNING_STYLE)
        self.problems.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.problems.hide()
        column.addWidget(self.problems)
        # A text box that scrolls sideways: the table is ~100 columns wide, and a label that wide
        # would widen the whole config panel (it fits its width to its contents).
        self.table = QPlainTextEdit(readOnly=True)
        self.table.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.table.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.table.setMaximumHeight(140)
        self.table.hide()
        column.addWidget(self.table)
        self._engine_command: Callable[..., list[str]] | None = None
        self._config: Callable[[], RunConfig | None] = lambda: None
        self._job: EngineJob | None = None
        self._folder: str | None = None
        self.button.clicked.connect(self.start)

    def configure(self, engine_command: Callable[..., list[str]], config: Callable[[], RunConfig | None]) -> None:
        """Where the jobs run and what the forms describe (the config panel's)."""
        self._engine_command, self._config = engine_command, config

    def is_checking(self) -> bool:
        return self._job is not None and self._job.is_running()

    def start(self) -> None:
        config = self._config()
        if config is None or self._engine_command is None:
            self._show([NOT_READY], "")
            return
        self._cleanup()
        self._folder = tempfile.mkdtemp(prefix="replica-studio-check-")
        path = Path(self._folder) / "run.json"
        config.save(path)
        self.button.setEnabled(False)
        self._show([], CHECKING)
        self._job = (EngineJob(self._engine_command("preflight", str(path), "--json"), name="the cluster check",
                               ok_codes=(EXIT_OK, EXIT_BAD_INPUT), timeout_s=CHECK_TIMEOUT_S, parent=self)
                     .on_result(self._on_report).on_failure(lambda line: self._show([line], ""))
                     .on_finished(self._on_finished).start(replacing=self._job))

    def _on_report(self, report: dict) -> None:
        self._show(list(report.get("problems", [])), str(report.get("table", "")))

    def _on_finished(self) -> None:
        self.button.setEnabled(True)
        self._cleanup()

    def _show(self, problems: list[str], table: str) -> None:
        self.problems.setText("\n".join(problems))
        self.problems.setVisible(bool(problems))
        self.table.setPlainText(table)
        self.table.setVisible(bool(table))

    def _cleanup(self) -> None:
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder = None
