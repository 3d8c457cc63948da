"""ElidedLabel, ItemLine and ElidedComboBox: labels and a combo box that never widen their window.

A plain QLabel asks for the width of its whole text as its minimum, so one long line (the
Training tab's statistics, the progress line, "Run failed: <the engine's message>" in the status
bar) raised the window's minimum width to about 1,420 px after a run, and a 1366 or 1280 px
laptop screen cut off its right side. This label asks for its text's width as its size hint (it
gets it when there is room) but for almost nothing as its minimum; when it is narrower than its
text it shows the text cut with "…" and the whole of it as its tooltip. ``text()`` is the whole
text. Plain text only: rich text wraps instead (``QLabel.setWordWrap``).

ItemLine is the other answer for a line of figures that all matter (the Training tab's "step 40 ·
smoothed loss 1.04 · … · val accuracy 74.0%"): it wraps onto a second line between two items,
never inside one, so nothing is cut.

A QComboBox likewise asks for its longest item's width as its minimum, and when it gets less it
cuts the text off at the frame with no sign ("Multi-worker mirrored (several process"):
ElidedComboBox asks for a few characters, shows the current text cut with "…", and puts the whole
text first in its tooltip (before the field's own tip).
"""
from __future__ import annotations

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QPainter, QPalette
from PySide6.QtWidgets import QComboBox, QLabel, QStyle, QStyleOptionComboBox, QStylePainter, QWidget

MIN_CHARACTERS = 8  # the narrowest it gets: a few characters and the ellipsis


class ElidedLabel(QLabel):
    def __init__(self, text: str = "", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setTextFormat(Qt.TextFormat.PlainText)
        self._own_tooltip = ""  # the tooltip this label set (the whole text), not one given by a caller
        self.setText(text)

    def setText(self, text: str) -> None:  # noqa: N802 (Qt override)
        super().setText(text)
        self._update_tooltip()

    def minimumSizeHint(self) -> QSize:  # noqa: N802 (Qt override)
        hint = super().minimumSizeHint()
        margins = self.contentsMargins()
        width = self.fontMetrics().averageCharWidth() * MIN_CHARACTERS + margins.left() + margins.right()
        return QSize(min(width, hint.width()), hint.height())

    def is_elided(self) -> bool:
        """The text is wider than the room it has: it is shown cut."""
        return self.fontMetrics().horizontalAdvance(self.text()) > self.contentsRect().width()

    def resizeEvent(self, event) -> None:  # noqa: N802 (Qt override)
        super().resizeEvent(event)
        self._update_tooltip()

    def paintEvent(self, event) -> None:  # noqa: N802 (Qt override)
        if not self.is_elided():
            super().paintEvent(event)
            return
        rect = self.contentsRect()
        shown = self.fontMetrics().elidedText(self.text(), Qt.TextElideMode.ElideRight, rect.width())
        painter = QPainter(self)
        self.style().drawItemText(painter, rect, int(self.alignment()), self.palette(), self.isEnabled(), shown,
                                  QPalette.ColorRole.WindowText)

    def _update_tooltip(self) -> None:
        """The whole text as the tooltip while it is cut; a tooltip set from outside is left alone."""
        if self.toolTip() not in ("", self._own_tooltip):
            return
        self._own_tooltip = self.text() if self.is_elided() else ""
        self.setToolTip(self._own_tooltip)


class ItemLine(QLabel):
    """Items joined by ``SEPARATOR``, wrapped only between items; ``text()`` is the text as set."""

    SEPARATOR = "  ·  "

    def __init__(self, text: str = "", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setTextFormat(Qt.TextFormat.PlainText)
        self.setWordWrap(True)
        self._text = ""
        self.setText(text)

    def setText(self, text: str) -> None:  # noqa: N802 (Qt override)
        self._text = text
        # No-break spaces inside each item and before the dot: a line breaks only after a dot.
        items = [item.replace(" ", "\u00a0") for item in text.split(self.SEPARATOR)]
        super().setText("\u00a0\u00a0·  ".join(items))

    def text(self) -> str:
        return self._text


class ElidedComboBox(QComboBox):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._tip = ""  # the tip given by the caller; the whole text goes before it while cut
        self.currentIndexChanged.connect(self._update_tooltip)

    def setToolTip(self, tip: str) -> None:  # noqa: N802 (Qt override)
        self._tip = tip
        self._update_tooltip()

    def minimumSizeHint(self) -> QSize:  # noqa: N802 (Qt override)
        option = self._option()
        text = QSize(self.fontMetrics().averageCharWidth() * MIN_CHARACTERS, self.fontMetrics().height())
        if not option.currentIcon.isNull():
            text.setWidth(text.width() + self.iconSize().width() + 4)
        small = self.style().sizeFromContents(QStyle.ContentsType.CT_ComboBox, option, text, self)
        hint = super().minimumSizeHint()
        return QSize(min(small.width(), hint.width()), hint.height())

    def is_elided(self) -> bool:
        """The current text is wider than the room the box has for it: it is shown cut."""
        return not self.isEditable() and self.fontMetrics().horizontalAdvance(self.currentText()) > self._text_width()

    def resizeEvent(self, event) -> None:  # noqa: N802 (Qt override)
        super().resizeEvent(event)
        self._update_tooltip()

    def paintEvent(self, event) -> None:  # noqa: N802 (Qt override)
        if not self.is_elided():
            super().paintEvent(event)
            return
        # What QComboBox.paintEvent draws, with the label's text cut to its room.
        painter = QStylePainter(self)
        option = self._option()
        painter.drawComplexControl(QStyle.ComplexControl.CC_ComboBox, option)
        option.currentText = self.fontMetrics().elidedText(self.currentText(), Qt.TextElideMode.ElideRight,
                                                           self._text_width())
        painter.drawControl(QStyle.ControlElement.CE_ComboBoxLabel, option)

    def _option(self) -> QStyleOptionComboBox:
        option = QStyleOptionComboBox()
        self.initStyleOption(option)
        return option

    def _text_width(self) -> int:
        option = self._option()
        field = self.style().subControlRect(QStyle.ComplexControl.CC_ComboBox, option,
                                            QStyle.SubControl.SC_ComboBoxEditField, self)
        icon = self.iconSize().width() + 4 if not option.currentIcon.isNull() else 0
        return field.width() - icon - 2  # the style draws the label 1 px in from each side

    def _update_tooltip(self) -> None:
        whole = self.currentText() if self.is_elided() else ""
        super().setToolTip("\n\n".join(t for t in (whole, self._tip) if t))
