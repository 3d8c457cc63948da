"""TryPanel: try a model on your own images, or on samples of its test set.

    panel = TryPanel()
    panel.set_model_source(run_dir)          # or a .keras / SavedModel / .tflite / .onnx path
    panel.add_image_files(["seven.png"])     # or drag and drop files onto the panel

Images added while the model is still loading are classified as soon as it is ready. The
panel takes only drops it can use (images, model files, run and SavedModel folders); other
drops go on to its parent, so a dataset dropped on the Try tab still reaches the window.

Each image is shown as the model sees it (resized, grey or colour, enlarged without
smoothing so the pixels stay visible) beside a bar chart of its top-5 classes. Loading the
model and predicting happen on a :class:`TaskThread`, never on the GUI thread. Signals:
``model_loaded(str)`` (a one-line description), ``predictions_ready(list)`` (the new
``Prediction`` objects), ``failed(str)`` (one line).
"""
from __future__ import annotations

import html
from pathlib import Path
from typing import Sequence

import numpy as np
from PySide6.QtCore import QRectF, QSize, Qt, Signal
from PySide6.QtGui import QColor, QImage, QPainter, QPalette, QPixmap
from PySide6.QtWidgets import (QFileDialog, QFrame, QHBoxLayout, QLabel, QMenu, QPushButton, QScrollArea,
                               QSizePolicy, QToolButton, QVBoxLayout, QWidget)

from gui_app.core.export import ExportCancelled, ExportError, Prediction, Predictor, load_predictor
from gui_app.ui.workers.task_thread import TaskThread

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif")
MODEL_SUFFIXES = (".keras", ".tflite", ".onnx")
TOP_K = 5
THUMBNAIL = 96
TEST_SAMPLES = 8
BARS_MAX_WIDTH = 560  # a top-5 chart stretched over a wide window is hard to read across
TRUE_CLASS_COLOR = "#59a14f"
_KIND_NAMES = {"run": "run", "keras": "Keras", "savedmodel": "SavedModel", "tflite": "TensorFlow Lite",
               "onnx": "ONNX"}


def model_source_for(path: str | Path) -> Path:
    """What to load for a chosen file: a SavedModel's ``saved_model.pb`` means its folder, and a
    run's ``model.keras`` means the run (which adds the softmax and the class names the bare
    file lacks: it outputs logits and has no model card)."""
    path = Path(path)
    if path.name == "saved_model.pb" or (path.name == "model.keras" and (path.parent / "config.json").is_file()):
        return path.parent
    return path


def is_model_path(path: Path) -> bool:
    """A model file, a SavedModel folder or a run folder with a trained model."""
    if path.is_dir():
        return (path / "saved_model.pb").is_file() or (path / "model.keras").is_file()
    return path.suffix.lower() in MODEL_SUFFIXES


def is_image_path(path: Path) -> bool:
    return path.suffix.lower() in IMAGE_SUFFIXES and not path.is_dir()


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

    def entries(self) -> list[tuple[str, float]]:
        return list(self._entries)

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


class _PredictionRow(QFrame):
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
        h, w, c = prediction.image.shape
        caption = f"<b>{html.escape(Path(prediction.source).name)}</b><br>{w}×{h} {'grey' if c == 1 else 'colour'}"
        true_name = None
        if prediction.label is not None:
            true_name = prediction.class_names[prediction.label]
            caption += f"<br>true class: {html.escape(true_name)}"
        text = QLabel(caption, textFormat=Qt.TextFormat.RichText, wordWrap=True)
        text.setFixedWidth(150)  # the same in every row, so the bar charts line up
        text.setToolTip(prediction.source)
        self.bars = TopKBars()
        self.bars.set_entries([(name, p) for _, name, p in prediction.top(TOP_K)], true_name)
        self.bars.setMaximumWidth(BARS_MAX_WIDTH)
        layout = QHBoxLayout(self)
        layout.addWidget(image)
        layout.addWidget(text)
        layout.addWidget(self.bars, 1)
        layout.addStretch(0)


class TryPanel(QWidget):
    model_loaded = Signal(str)
    predictions_ready = Signal(list)
    failed = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._tasks = TaskThread("try-model", self, expected=(ExportError, ExportCancelled))
        self._predictor: Predictor | None = None
        self._generation = 0  # predictions of a replaced model are dropped when they arrive
        self._source: Path | None = None  # what is loaded or loading
        self._waiting: list[str] = []  # images added while the model loads
        self._rows: list[_PredictionRow] = []
        self.last_dir = str(Path.home())  # where the file dialogs start
        self.setAcceptDrops(True)

        self._model_label = QLabel("No model. Open a run or an exported model.", wordWrap=True)
        open_button = QToolButton(text="Open model")
        open_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        menu = QMenu(open_button)
        menu.addAction("Model file (.keras, .tflite, .onnx)…", self.open_model_file_dialog)
        menu.addAction("Run or SavedModel folder…", self._on_open_model_folder)
        open_button.setMenu(menu)
        self._add_button = QPushButton("Add images…")
        self._add_button.clicked.connect(self._on_add_images)
        self._samples_button = QPushButton("Test samples")
        self._samples_button.setToolTip(f"Classify {TEST_SAMPLES} random images of the model's test set")
        self._samples_button.clicked.connect(lambda: self.add_test_samples(TEST_SAMPLES))
        clear_button = QPushButton("Clear")
        clear_button.clicked.connect(self.clear)
        for button in (self._add_button, self._samples_button):
            button.setEnabled(False)
        header = QHBoxLayout()
        header.addWidget(self._model_label, 1)
        for widget in (open_button, self._add_button, self._samples_button, clear_button):
            header.addWidget(widget)

        self._status = QLabel(wordWrap=True)
        self._list = QVBoxLayout()
        self._placeholder = QLabel("Drop PNG, JPEG or BMP images here to see what the model makes of them\n"
                                   "(or a .keras, .tflite, .onnx file or a SavedModel folder to try that model).",
                                   alignment=Qt.AlignmentFlag.AlignCenter, wordWrap=True)
        self._placeholder.setEnabled(False)  # drawn in the palette's muted text colour
        self._placeholder.setMinimumHeight(160)
        self._list.addWidget(self._placeholder)
        self._list.addStretch(1)
        container = QWidget()
        container.setLayout(self._list)
        scroll = QScrollArea(widgetResizable=True)
        scroll.setWidget(container)
        layout = QVBoxLayout(self)
        layout.addLayout(header)
        layout.addWidget(self._status)
        layout.addWidget(scroll, 1)

    # ---- public ---------------------------------------------------------------------------
    def set_model_source(self, path: str | Path) -> None:
        """Try the model of a run folder or an exported file (loaded in the background)."""
        self._generation += 1
        generation = self._generation
        self.clear()
        self._predictor = None
        self._source = Path(path)
        self._waiting = []
        for button in (self._add_button, self._samples_button):
            button.setEnabled(False)
        self._model_label.setText(f"Loading {html.escape(Path(path).name)}…")
        self._status.setText("Loading the model (the first one takes a few seconds: TensorFlow starts)…")
        self._tasks.submit(lambda report: load_predictor(path),
                           on_success=lambda p: self._on_model_loaded(generation, p),
                           on_failure=lambda exc: self._on_model_failed(generation, exc))

    def predictor(self) -> Predictor | None:
        return self._predictor

    def model_source(self) -> Path | None:
        """The run folder or file last given to :meth:`set_model_source` (loaded or loading)."""
        return self._source

    def is_loading(self) -> bool:
        return self._source is not None and self._predictor is None

    def add_image_files(self, paths: Sequence[str | Path]) -> None:
        paths = [str(p) for p in paths]
        if not paths:
            return
        if self.is_loading():
            self._waiting += paths
            self._status.setText(f"{len(self._waiting)} image{'s' if len(self._waiting) != 1 else ''} "
                                 f"waiting for the model to load…")
            return
        predictor = self._ready()
        if predictor is None:
            return
        self._status.setText(f"Classifying {len(paths)} image{'s' if len(paths) != 1 else ''}…")
        self._run(lambda report: predictor.predict_files(paths))

    def add_test_samples(self, count: int = TEST_SAMPLES) -> None:
        predictor = self._ready()
        if predictor is None:
            return
        self._status.setText(f"Loading {count} test images…")

        def task(report):
            images, labels = predictor.test_samples(count)
            return predictor.predict_images(images, [f"test image {i + 1}" for i in range(len(images))], labels)
        self._run(task)

    def rows(self) -> list[_PredictionRow]:
        return list(self._rows)

    def clear(self) -> None:
        for row in self._rows:
            self._list.removeWidget(row)
            row.deleteLater()
        self._rows.clear()
        self._placeholder.setVisible(True)

    def shutdown(self) -> None:
        self._tasks.shutdown()

    # ---- drag and drop ---------------------------------------------------------------------
    def dragEnterEvent(self, event) -> None:  # noqa: N802 - Qt API
        # Ignored drags (a dataset folder, an .npz) go on to the window, which opens datasets.
        if any(is_image_path(p) or is_model_path(p) for p in _local_paths(event.mimeData())):
            event.acceptProposedAction()
        else:
            event.ignore()

    def dropEvent(self, event) -> None:  # noqa: N802 - Qt API
        paths = _local_paths(event.mimeData())
        models = [p for p in paths if is_model_path(p)]
        images = [p for p in paths if is_image_path(p)]
        if not (models or images):
            event.ignore()
            return
        event.acceptProposedAction()
        if models:
            self.set_model_source(model_source_for(models[0]))
        self.add_image_files(images)  # after a dropped model: they wait for it to load

    def closeEvent(self, event) -> None:  # noqa: N802 - Qt API
        self.shutdown()
        super().closeEvent(event)

    # ---- internals -------------------------------------------------------------------------
    def _ready(self) -> Predictor | None:
        if self._predictor is None:
            self._fail("Open a model first (a run folder or an exported file).")
        return self._predictor

    def _run(self, task) -> None:
        generation = self._generation
        self._tasks.submit(task, on_success=lambda found: self._on_predictions(generation, found),
                           on_failure=lambda exc: self._on_failed(generation, exc))

    def _on_model_loaded(self, generation: int, predictor: Predictor) -> None:
        if generation != self._generation:
            return
        self._predictor = predictor
        h, w, c = predictor.input_shape
        description = (f"{predictor.source.name}: {_KIND_NAMES[predictor.kind]}, {w}×{h} "
                       f"{'grey' if c == 1 else 'colour'}, {len(predictor.class_names)} classes")
        self._model_label.setText(f"<b>{html.escape(description)}</b>")
        self._model_label.setToolTip(str(predictor.source))
        self._add_button.setEnabled(True)
        self._samples_button.setEnabled(predictor.dataset_config is not None)
        self._status.setText(" ".join(predictor.warnings) or "Drop images here, or add test samples.")
        self.model_loaded.emit(description)
        waiting, self._waiting = self._waiting, []
        self.add_image_files(waiting)

    def _on_model_failed(self, generation: int, exc: Exception) -> None:
        if generation == self._generation:
            self._model_label.setText("No model.")
            self._source, self._waiting = None, []
            self._fail(str(exc))

    def _on_predictions(self, generation: int, predictions: list[Prediction]) -> None:
        if generation != self._generation:
            return
        for prediction in predictions:
            row = _PredictionRow(prediction)
            self._list.insertWidget(len(self._rows) + 1, row)  # after the (hidden) placeholder
            self._rows.append(row)
        self._placeholder.setVisible(not self._rows)
        self._status.setText(f"{len(self._rows)} image{'s' if len(self._rows) != 1 else ''} classified.")
        self.predictions_ready.emit(predictions)

    def _on_failed(self, generation: int, exc: Exception) -> None:
        if generation == self._generation:
            self._fail(str(exc))

    def _fail(self, message: str) -> None:
        line = message.strip().splitlines()[0] if message.strip() else "failed"
        self._status.setText(f"<span style='color:#e15759'>{html.escape(line)}</span>")
        self.failed.emit(line)

    def open_model_file_dialog(self) -> None:
        """Ask for a .keras, .tflite or .onnx file (or a SavedModel's saved_model.pb) and try it."""
        path, _ = QFileDialog.getOpenFileName(self, "Open a model to try", self.last_dir,
                                              "Models (*.keras *.tflite *.onnx saved_model.pb)")
        if path:
            self.last_dir = str(Path(path).parent)
            self.set_model_source(model_source_for(path))

    def _on_open_model_folder(self) -> None:
        path = QFileDialog.getExistingDirectory(self, "Open a run or SavedModel folder", self.last_dir)
        if path:
            self.last_dir = str(Path(path).parent)
            self.set_model_source(path)

    def _on_add_images(self) -> None:
        paths, _ = QFileDialog.getOpenFileNames(self, "Add images", self.last_dir,
                                                "Images (*.png *.jpg *.jpeg *.bmp *.gif)")
        if paths:
            self.last_dir = str(Path(paths[0]).parent)
        self.add_image_files(paths)


def _local_paths(mime) -> list[Path]:
    return [Path(url.toLocalFile()) for url in mime.urls() if url.isLocalFile()] if mime.hasUrls() else []
