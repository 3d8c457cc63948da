"""DatasetTab: what the chosen dataset holds, before any training.

One row per class: its name, a bar with its number of training examples (so an unbalanced
dataset is obvious at a glance) and a strip of sample images from the ``--samples`` npz the
inspector wrote (``x``: uint8 NHWC, ``y``: class indices).
"""
from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QImage, QPixmap
from PySide6.QtWidgets import QGridLayout, QLabel, QProgressBar, QScrollArea, QVBoxLayout, QWidget

import numpy as np

from gui_app.core.wording import count, example_counts
from gui_app.ui.colors import ERROR_STYLE, WARNING_STYLE

SAMPLE_HEIGHT = 40  # pixels on screen for one sample image (when the view cannot say)
MAX_SAMPLE_HEIGHT = 72
SAMPLES_PER_CLASS = 8
GAP = 3


def describe_dataset(dataset: dict) -> str:
    shape = "×".join(str(d) for d in dataset.get("input_shape") or [])
    classes = len(dataset.get("class_names") or [])
    # Counts as the command line gives them (gui_app.core.wording): "1,294 train + 144 validation / ...".
    parts = [count(classes, "class", "classes") if classes else "", f"input {shape}" if shape else "",
             example_counts(dataset)]
    return " · ".join(p for p in parts if p)


def to_qimage(images: np.ndarray, height: int = SAMPLE_HEIGHT) -> QImage:
    """A horizontal strip of ``images`` (uint8, NHWC with C = 1 or 3), scaled by a whole
    factor to at most ``height`` pixels (never below the original size)."""
    images = np.asarray(images)
    if images.ndim == 3:
        images = images[..., None]
    n, h, w, c = images.shape
    if c not in (1, 3):
        images, c = images[..., :1], 1
    if images.dtype != np.uint8:  # a float dataset: stretch to 0..255 for display
        low, high = float(images.min()), float(images.max())
        images = ((images - low) / ((high - low) or 1.0) * 255).astype(np.uint8)
    strip = np.full((h, n * (w + GAP) - GAP, c), 255, np.uint8)
    for i, image in enumerate(images):
        strip[:, i * (w + GAP):i * (w + GAP) + w] = image
    strip = np.ascontiguousarray(strip)
    fmt = QImage.Format.Format_Grayscale8 if c == 1 else QImage.Format.Format_RGB888
    image = QImage(strip.data, strip.shape[1], strip.shape[0], strip.strides[0], fmt).copy()
    scale = max(1, height // h)  # integer scaling keeps small digits crisp
    return image.scaled(image.width() * scale, image.height() * scale, Qt.AspectRatioMode.KeepAspectRatio,
                        Qt.TransformationMode.FastTransformation)


class DatasetTab(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = QVBoxLayout(self)
        self.title = QLabel("Choose a dataset: its classes and sample images appear here.")
        self.title.setWordWrap(True)
        font = self.title.font()
        font.setPointSizeF(font.pointSizeF() * 1.15)
        self.title.setFont(font)
        layout.addWidget(self.title)
        self.notes = QLabel()
        self.notes.setWordWrap(True)
        layout.addWidget(self.notes)
        self._scroll = QScrollArea()
        self._scroll.setWidgetResizable(True)
        layout.addWidget(self._scroll, 1)
        self._scroll.setWidget(QWidget())

    def clear(self) -> None:
        """The dataset on the forms changed: what the tab showed is about another one."""
        self.title.setText("Choose a dataset: its classes and sample images appear here.")
        self.notes.clear()
        self._scroll.setWidget(QWidget())

    def set_busy(self, text: str = "Inspecting the dataset…") -> None:
        self.notes.setText(text)
        self.notes.setStyleSheet("")

    def show_error(self, message: str) -> None:
        self.notes.setText(message)
        self.notes.setStyleSheet(ERROR_STYLE)

    def show_inspection(self, dataset: dict, samples_path: str | None = None) -> None:
        names = [str(n) for n in dataset.get("class_names") or []]
        self.title.setText(f"<b>{dataset.get('name', 'dataset')}</b> — {describe_dataset(dataset)}")
        warnings = [str(w) for w in dataset.get("warnings") or []]
        self.notes.setText("\n".join(warnings))
        self.notes.setStyleSheet(WARNING_STYLE if warnings else "")
        counts = dataset.get("class_counts")
        if isinstance(counts, dict):
            counts = [counts.get(n, counts.get(str(i))) for i, n in enumerate(names)]
        counts = list(counts or [])
        samples = self._load_samples(samples_path)

        body = QWidget()
        grid = QGridLayout(body)
        grid.setColumnStretch(2, 1)
        grid.setHorizontalSpacing(12)
        top = max([c for c in counts if isinstance(c, int)] or [1])
        self._scroll.setWidget(body)  # the previous rows go with the widget it replaces
        height = self._sample_height(len(names), samples)
        for i, name in enumerate(names):
            label = QLabel(name if name == str(i) else f"{i}  {name}")
            strip = QLabel()
            if samples is not None:
                x, y = samples
                chosen = x[y == i][:SAMPLES_PER_CLASS]
                if len(chosen):
                    strip.setPixmap(QPixmap.fromImage(to_qimage(chosen, height)))
            # The bar takes the rest of the row: a class-balance chart next to the samples.
            bar = QProgressBar(maximum=top, textVisible=True)
            bar.setMinimumWidth(120)
            count = counts[i] if i < len(counts) else None
            bar.setValue(count if isinstance(count, int) else 0)
            bar.setFormat(f"{count:,} training examples" if isinstance(count, int) else "?")
            grid.addWidget(label, i, 0)
            grid.addWidget(strip, i, 1)
            grid.addWidget(bar, i, 2)
        grid.setRowStretch(len(names), 1)

    def _sample_height(self, classes: int, samples: tuple[np.ndarray, np.ndarray] | None) -> int:
        """Sample images as large as the visible area allows for one row per class, so a
        10-class dataset fills the tab and a 100-class one stays scrollable."""
        if not classes or samples is None:
            return SAMPLE_HEIGHT
        visible = self._scroll.viewport().height() if self._scroll.isVisible() else 480
        fit = (visible - 12) // classes - 8
        return int(min(MAX_SAMPLE_HEIGHT, max(SAMPLE_HEIGHT // 2, fit)))

    @staticmethod
    def _load_samples(path: str | None) -> tuple[np.ndarray, np.ndarray] | None:
        if not path:
            return None
        try:
            with np.load(path) as data:
                x, y = np.asarray(data["x"]), np.asarray(data["y"]).reshape(-1)
        except (OSError, KeyError, ValueError):
            return None
        return (x, y) if len(x) == len(y) else None
