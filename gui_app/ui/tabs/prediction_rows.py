"""The Try tab's rows: an image as the model sees it beside its top-5 classes, or why an image
could not be read. Drawn from :class:`~gui_app.core.predictions.Prediction` records (NumPy
only); the predicting happens in the engine's ``predict --serve`` process. Above them,
:class:`InvertChoice`: whether the engine inverts the images first.
"""
from __future__ import annotations

import html
from pathlib import Path
from typing import Callable, Sequence

from PySide6.QtCore import QRectF, QSize, Qt
from PySide6.QtGui import QColor, QImage, QPainter, QPalette, QPixmap
from PySide6.QtWidgets import QCheckBox, QFrame, QHBoxLayout, QLabel, QSizePolicy, QWidget

import numpy as np

from gui_app.core.image_files import read_header
from gui_app.core.predictions import INVERTED, Prediction
from gui_app.ui.colors import ERROR_COLOR

TOP_K = 5
THUMBNAIL = 96
CAPTION_WIDTH = 150
BARS_MAX_WIDTH = 560  # a top-5 chart stretched over a wide window is hard to read across
TRUE_CLASS_COLOR = "#59a14f"


def to_qimage(image: np.ndarray) -> QImage:
    """(H, W, 1|3) uint8 -> a QImage that owns its pixels."""
    image = np.ascontiguousarray(image)
    height, width, channels = image.shape
    fmt = QImage.Format.Format_Grayscale8 if channels == 1 else QImage.Format.Format_RGB888
    return QImage(image.data, width, height, width * channels, fmt).copy()


class TopKBars(QWidget):
    """Horizontal bars: class name, probability bar, percentage; the true class in green."""

    ROW = 18

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._entries: list[tuple[str, float]] = []
        self._true_name: str | None = None
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)

    def set_entries(self, entries: Sequence[tuple[str, float]], true_name: str | None = None) -> None:
        self._entries = [(str(n), float(p)) for n, p in entries]
        self._true_name = true_name
        self.setFixedHeight(self.ROW * max(len(self._entries), 1))
        self.update()

    def sizeHint(self) -> QSize:  # noqa: N802 - Qt API
        return QSize(280, self.ROW * max(len(self._entries), 1))

    def paintEvent(self, event) -> None:  # noqa: N802 - Qt API
        painter = QPainter(self)
        metrics = painter.fontMetrics()
        name_width = min(max((metrics.horizontalAdvance(n) for n, _ in self._entries), default=0) + 8, 140)
        percent_width = metrics.horizontalAdvance("100.0 %") + 8
        bar_width = max(self.width() - name_width - percent_width, 10)
        text_color = self.palette().color(QPalette.ColorRole.WindowText)
        bar_color = self.palette().color(QPalette.ColorRole.Highlight)
        for row, (name, probability) in enumerate(self._entries):
            top = row * self.ROW
            painter.setPen(text_color)
            label = metrics.elidedText(name, Qt.TextElideMode.ElideRight, name_width - 8)
            align = Qt.AlignmentFlag.AlignVCenter
            painter.drawText(QRectF(0, top, name_width, self.ROW), align | Qt.AlignmentFlag.AlignLeft, label)
            color = QColor(TRUE_CLASS_COLOR) if name == self._true_name else bar_color
            painter.fillRect(QRectF(name_width, top + 3, bar_width * probability, self.ROW - 6), color)
            painter.drawText(QRectF(name_width + bar_width, top, percent_width, self.ROW),
                             align | Qt.AlignmentFlag.AlignRight, f"{probability:.1%}")
        painter.end()


def caption(prediction: Prediction, elide: Callable[[str, Qt.TextElideMode, int], str]) -> str:
    """The file's name (elided in the middle, so its end shows: the whole path is the tooltip),
    the file's own size and colour beside what the model sees (a 64 px RGB file was labelled
    "8x8 grey": that is the model's input), the true class of a test image, and whether the image
    was inverted first (and why)."""
    name = Path(prediction.source).name or prediction.source
    h, w, c = prediction.image.shape
    seen = f"{w}×{h} {'grey' if c == 1 else 'colour'}"
    lines = [f"<b>{html.escape(elide(name, Qt.TextElideMode.ElideMiddle, CAPTION_WIDTH))}</b>"]
    found = read_header(prediction.source) if Path(prediction.source).is_file() else None
    if found is not None:
        width, height, channels = found
        colour = {1: " grey", 3: " colour"}.get(channels or 0, "")
        lines.append(f"file {width}×{height}{colour}")
        lines.append(f"model sees {seen}")
    else:
        lines.append(f"as the model sees it: {seen}")
    if prediction.label is not None:
        lines.append(f"true class: {html.escape(prediction.class_names[prediction.label])}")
    if prediction.inverted:  # the thumbnail is the inverted image: say why it is not the file's
        lines.append(f"<i>{html.escape(INVERTED[prediction.inverted])}</i>")
    return "<br>".join(lines)


class PredictionRow(QFrame):
    def __init__(self, prediction: Prediction, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.prediction = prediction
        self.setFrameShape(QFrame.Shape.StyledPanel)
        image = QLabel()
        pixmap = QPixmap.fromImage(to_qimage(prediction.image))
        # Nearest neighbour: an 8x8 digit should look like 8x8 pixels, not a blur.
        image.setPixmap(pixmap.scaled(THUMBNAIL, THUMBNAIL, Qt.AspectRatioMode.KeepAspectRatio,
                                      Qt.TransformationMode.FastTransformation))
        image.setFixedSize(THUMBNAIL, THUMBNAIL)
        image.setAlignment(Qt.AlignmentFlag.AlignCenter)
        true_name = None if prediction.label is None else prediction.class_names[prediction.label]
        self.caption = text = QLabel(caption(prediction, self.fontMetrics().elidedText),
                                     textFormat=Qt.TextFormat.RichText, wordWrap=True)
        text.setFixedWidth(CAPTION_WIDTH)  # the same in every row, so the bar charts line up
        text.setToolTip(prediction.source)
        self.bars = TopKBars()
        self.bars.set_entries([(name, p) for _, name, p in prediction.top(TOP_K)], true_name)
        self.bars.setMaximumWidth(BARS_MAX_WIDTH)
        layout = QHBoxLayout(self)
        layout.addWidget(image)
        layout.addWidget(text)
        layout.addWidget(self.bars, 1)
        layout.addStretch(0)


class ErrorRow(QFrame):
    """An image the model could not read: its name and the reason, in the list with the others."""

    def __init__(self, source: str, message: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.source, self.message = source, message
        self.setFrameShape(QFrame.Shape.StyledPanel)
        label = QLabel(f"<b>{html.escape(Path(source).name or source)}</b>: "
                       f"<span style='color:{ERROR_COLOR}'>{html.escape(message)}</span>",
                       textFormat=Qt.TextFormat.RichText, wordWrap=True)
        label.setToolTip(source)
        QHBoxLayout(self).addWidget(label)


class InvertChoice(QWidget):
    """Invert (always), and for a model that learnt light subjects on a dark background, Invert
    light backgrounds (on unless unticked): a dark "3" on white paper was called "4". What they
    say is a request's ``invert`` (gui_app.core.predictions.INVERT_MODES); test samples are
    never inverted."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.always = QCheckBox("Invert")
        self.always.setToolTip("Invert your images first: dark on light becomes light on dark")
        self.auto = QCheckBox("Invert light backgrounds")
        self.auto.setChecked(True)
        self.auto.setVisible(False)
        self.auto.setToolTip("The model learnt a dark background: invert an image whose border is light")
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.always)
        layout.addWidget(self.auto)

    def follow_model(self, dark_background: bool) -> None:
        self.auto.setVisible(dark_background)

    def mode(self) -> str:
        if self.always.isChecked():
            return "always"
        # Hidden (no model yet, or one of light backgrounds) it still says auto: the engine
        # knows what the model learnt, and images added while it loads wait with this request.
        return "auto" if self.auto.isChecked() else "never"
