"""LogTab: the engine's stderr (TensorFlow, absl and our warnings) and the app's own notes.

Lines are appended as they come and the view keeps the last ``MAX_LINES``; long lines wrap.
Errors and warnings are coloured by a syntax highlighter and counted below the view; routine
output (TensorFlow's INFO lines, the converters' notes, a cluster that formed: :mod:`.log_lines`)
is greyed and not counted, so the count is the number of lines worth reading.
"""
from __future__ import annotations

import time

from PySide6.QtCore import Signal
from PySide6.QtGui import QColor, QFontDatabase, QSyntaxHighlighter, QTextCharFormat, QTextDocument, QTextOption
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPlainTextEdit, QPushButton, QVBoxLayout, QWidget

from gui_app.ui.colors import ERROR_COLOR, WARNING_COLOR
from gui_app.ui.tabs.log_lines import ERROR, ROUTINE, WARNING, kind

MAX_LINES = 20_000
NOTE_MARK = "▸"  # the app's own lines


class _Highlighter(QSyntaxHighlighter):
    def __init__(self, document: QTextDocument) -> None:
        super().__init__(document)
        # Keyed by kind(), whose None (an ordinary line) has no format.
        self._formats: dict[str | None, QTextCharFormat] = {
            kind_: QTextCharFormat() for kind_ in (ERROR, WARNING, ROUTINE, NOTE_MARK)}
        for kind_, colour in ((ERROR, ERROR_COLOR), (WARNING, WARNING_COLOR), (ROUTINE, "#8a8a8a"),
                              (NOTE_MARK, "#1565c0")):
            self._formats[kind_].setForeground(QColor(colour))

    def highlightBlock(self, text: str) -> None:  # noqa: N802 (Qt override)
        fmt = self._formats.get(NOTE_MARK if text.startswith(NOTE_MARK) else kind(text))
        if fmt is not None:
            self.setFormat(0, len(text), fmt)


class LogTab(QWidget):
    warnings_seen = Signal(int)  # error and warning lines so far (routine lines not counted)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = QVBoxLayout(self)
        self.view = QPlainTextEdit(readOnly=True)
        self.view.setMaximumBlockCount(MAX_LINES)
        # Wrapped, at a word if it can (a long path or command line wraps anywhere): one line of a
        # failure used to run off the right edge.
        self.view.setLineWrapMode(QPlainTextEdit.LineWrapMode.WidgetWidth)
        self.view.setWordWrapMode(QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)
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
        self._counts = {ERROR: 0, WARNING: 0}

    def append_line(self, line: str) -> None:
        self.view.appendPlainText(line)
        what = kind(line)
        if what in self._counts:
            self._counts[what] += 1
            self.summary.setText(", ".join(_count(n, what) for what, n in self._counts.items() if n))
            self.warnings_seen.emit(sum(self._counts.values()))

    def note(self, text: str) -> None:
        """A line from the app itself (run started, stopped, failed), marked and timestamped."""
        self.view.appendPlainText(f"{NOTE_MARK} {time.strftime('%H:%M:%S')}  {text}")

    def clear(self) -> None:
        self.view.clear()
        self._counts = dict.fromkeys(self._counts, 0)
        self.summary.clear()
        self.warnings_seen.emit(0)


def _count(n: int, what: str) -> str:
    return f"{n} {what} line{'s' if n != 1 else ''}"
