"""LogTab: the engine's stderr (TensorFlow, absl and our warnings) and the app's own notes.

Lines are appended as they come and the view keeps the last ``MAX_LINES``; warnings and
errors are coloured by a syntax highlighter so they stand out in TensorFlow's chatter.
"""
from __future__ import annotations

import re
import time

from PySide6.QtCore import Signal
from PySide6.QtGui import QColor, QFontDatabase, QSyntaxHighlighter, QTextCharFormat, QTextDocument
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPlainTextEdit, QPushButton, QVBoxLayout, QWidget

from gui_app.ui.colors import ERROR_COLOR, WARNING_COLOR

MAX_LINES = 20_000
_ERROR = re.compile(r"\b(error|exception|traceback|fatal|failed)\b", re.IGNORECASE)
_WARNING = re.compile(r"\bwarn(ing)?\b|^W\d{4} ", re.IGNORECASE)


class _Highlighter(QSyntaxHighlighter):
    def __init__(self, document: QTextDocument) -> None:
        super().__init__(document)
        self._error, self._warning, self._note = QTextCharFormat(), QTextCharFormat(), QTextCharFormat()
        self._error.setForeground(QColor(ERROR_COLOR))
        self._warning.setForeground(QColor(WARNING_COLOR))
        self._note.setForeground(QColor("#1565c0"))

    def highlightBlock(self, text: str) -> None:  # noqa: N802 (Qt override)
        fmt = (self._note if text.startswith("▸") else self._error if _ERROR.search(text)
               else self._warning if _WARNING.search(text) else None)
        if fmt is not None:
            self.setFormat(0, len(text), fmt)


class LogTab(QWidget):
    warnings_seen = Signal(int)  # total warning/error lines so far (the tab shows a count)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = QVBoxLayout(self)
        self.view = QPlainTextEdit(readOnly=True)
        self.view.setMaximumBlockCount(MAX_LINES)
        self.view.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.view.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self._highlighter = _Highlighter(self.view.document())
        layout.addWidget(self.view, 1)
        row = QHBoxLayout()
        self.summary = QLabel()
        row.addWidget(self.summary, 1)
        clear = QPushButton("Clear")
        clear.clicked.connect(self.clear)
        row.addWidget(clear)
        layout.addLayout(row)
        self._warnings = 0

    def append_line(self, line: str) -> None:
        self.view.appendPlainText(line)
        if _ERROR.search(line) or _WARNING.search(line):
            self._warnings += 1
            self.summary.setText(f"{self._warnings} warning or error line{'s' if self._warnings != 1 else ''}")
            self.warnings_seen.emit(self._warnings)

    def note(self, text: str) -> None:
        """A line from the app itself (run started, stopped, failed), marked and timestamped."""
        self.view.appendPlainText(f"▸ {time.strftime('%H:%M:%S')}  {text}")

    def clear(self) -> None:
        self.view.clear()
        self._warnings = 0
        self.summary.clear()
        self.warnings_seen.emit(0)
