"""TryTab: try a model on your own images, or on samples of its test set.

    panel = TryTab()
    panel.set_model_source(run_dir)          # or a .keras / SavedModel / .tflite / .onnx path
    panel.add_image_files(["seven.png"])     # or drag and drop files onto the panel

Images added while the model is still loading are classified as soon as it is ready. The
panel takes only drops it can use (images, model files, run and SavedModel folders); other
drops go on to its parent, so a dataset dropped on the Try tab still reaches the window.

Each image is shown as the model sees it (resized, grey or colour, enlarged without
smoothing so the pixels stay visible) beside a bar chart of its top-5 classes. Loading the
model and predicting happen in a long-lived engine process, ``replica-studio predict
--serve MODEL``, a :class:`~gui_app.ui.workers.engine_job.ServingJob` (TensorFlow, LiteRT and
ONNX Runtime never enter the window's process): it is started when a model is set, replaced
when the model changes (the older one's late answers reach nobody) and ended with the panel
(:meth:`TryTab.shutdown`). An image the model cannot read is shown inline, in red, and the
others are still classified. Invert (:class:`~gui_app.ui.tabs.prediction_rows.InvertChoice`)
turns dark-on-light images over before the model sees them; for a model that learnt a dark
background the engine does it by itself to an image whose border is light, and the row says so.

The model of a run on an SSH host (``HOST:RUN_DIR``) stays there: ``predict --serve --host HOST``
loads it there, and the images dropped here go over the connection in the requests themselves
(``files``: their bytes). A dropped connection is one line in the tab; the model loads there again
with the next images. Signals: ``model_loaded(str)`` (a one-line description),
``predictions_ready(list)`` (the new :class:`~gui_app.core.predictions.Prediction` objects),
``image_failed(str, str)`` (path, one line), ``failed(str)`` (one line), ``log_line(str)``
(the engine's stderr, for the Log tab).
"""
from __future__ import annotations

import html
from pathlib import Path
from typing import Callable, Sequence

import shiboken6
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QLayout,
    QMenu,
    QMessageBox,
    QPushButton,
    QScrollArea,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from gui_app.core import wording
from gui_app.core.answers import ServeAnswer, ServeReady, decode
from gui_app.core.file_kinds import is_image_file, model_kind, model_source
from gui_app.core.formats import UNVERIFIED_SAVEDMODEL_FLAG
from gui_app.core.predictions import Prediction, sent_file
from gui_app.core.ssh_hosts import split_run_key
from gui_app.identity import app_command
from gui_app.ui.colors import ERROR_STYLE
from gui_app.ui.tabs.prediction_rows import TOP_K, ErrorRow, InvertChoice, PredictionRow
from gui_app.ui.workers.engine_job import ServingJob

TEST_SAMPLES = 8
DIGITS_HINT = ("This model learnt light strokes on a dark background (as MNIST and the bundled digits are): "
               "an image with a light background, a dark digit on white paper, is inverted first.")
_KIND_NAMES = {"run": "run", "keras": "Keras", "savedmodel": "SavedModel", "tflite": "TensorFlow Lite",
               "onnx": "ONNX"}


class TryTab(QWidget):
    model_loaded = Signal(str)
    predictions_ready = Signal(list)
    image_failed = Signal(str, str)
    failed = Signal(str)
    log_line = Signal(str)

    def __init__(self, parent: QWidget | None = None,
                 engine_command: Callable[..., list[str]] = app_command) -> None:
        super().__init__(parent)
        self._engine_command = engine_command
        self._server: ServingJob | None = None  # the predict --serve process of the model
        self.trust_box: QMessageBox | None = None  # the question about an unverified SavedModel
        self._info: ServeReady | None = None  # its "ready" line, once the model is loaded
        self._source: Path | None = None  # what is loaded or loading
        self._waiting: list[dict] = []  # requests made while the model loads
        self._next_id = 0
        self._rows: list[PredictionRow] = []
        self._error_rows: list[ErrorRow] = []
        self.last_dir = str(Path.home())  # where the file dialogs start
        self.setAcceptDrops(True)

        self._model_label = QLabel("No model. Open a run or an exported model.", wordWrap=True)
        open_button = QToolButton()
        open_button.setText("Open model")
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
        self.invert = InvertChoice()  # what the engine does to your images first
        header = QHBoxLayout()
        header.addWidget(self._model_label, 1)
        for widget in (self.invert, open_button, self._add_button, self._samples_button, clear_button):
            header.addWidget(widget)

        self._status = QLabel(wordWrap=True, textFormat=Qt.TextFormat.PlainText)
        self._list = QVBoxLayout()
        # Rows keep their height and the list scrolls: the scroll area otherwise squeezed eight
        # rows into a 720 px high window, each cut to a third of its thumbnail and bars.
        self._list.setSizeConstraint(QLayout.SizeConstraint.SetMinimumSize)
        self._placeholder = QLabel("Drop PNG, JPEG or BMP images here to see what the model makes of them\n"
                                   "(or a .keras, .tflite, .onnx file or a SavedModel folder to try that model).",
                                   alignment=Qt.AlignmentFlag.AlignCenter, wordWrap=True)
        self._placeholder.setEnabled(False)  # drawn in the palette's muted text colour
        self._placeholder.setMinimumHeight(160)
        self._list.addWidget(self._placeholder)
        self._list.addStretch(1)
        container = QWidget()
        container.setLayout(self._list)
        self._scroll = QScrollArea(widgetResizable=True)
        self._scroll.setWidget(container)
        # New results are brought into view once laid out (the range grows when they are), until
        # the user scrolls: "Test samples" added rows below the fold with nothing to say so.
        self._in_view: QWidget | None = None
        bar = self._scroll.verticalScrollBar()
        bar.rangeChanged.connect(self._bring_into_view)
        bar.actionTriggered.connect(lambda _action: setattr(self, "_in_view", None))
        layout = QVBoxLayout(self)
        layout.addLayout(header)
        layout.addWidget(self._status)
        layout.addWidget(self._scroll, 1)

    # ---- public ---------------------------------------------------------------------------
    def set_model_source(self, path: str | Path, trusted: bool = False) -> None:
        """Try the model of a run folder or an exported file: (re)start its predict process.
        ``trusted``: the user confirmed a SavedModel folder we did not export (loading runs its graph)."""
        self.clear()
        self._info, self._waiting = None, []
        for button in (self._add_button, self._samples_button):
            button.setEnabled(False)
        host, there = split_run_key(str(path))
        if host is None and not Path(path).exists():  # a typo or a moved file should not cost a TensorFlow start
            self._end_server()
            self._source = None
            self._model_label.setText("No model.")
            self._fail(f"{path}: no such file or folder")
            return
        self._source = Path(path)
        self._model_label.setText(f"Loading {html.escape(Path(there).name)}" + (f" on {html.escape(host)}" if host
                                                                                 else "") + "…")
        self._model_label.setToolTip(str(path))
        self._say("Loading the model (TensorFlow starts in its own process: a few seconds)…")
        self._start_server(trusted)

    def _start_server(self, trusted: bool = False) -> None:
        host, there = split_run_key(str(self._source))
        flags = [UNVERIFIED_SAVEDMODEL_FLAG] if trusted else []
        where = [] if host is None else ["--host", host]  # the model stays there
        self._server = (ServingJob(self._engine_command("predict", "--serve", there, "--top", str(TOP_K), *flags,
                                                        *where), name="the model process", parent=self)
                        .on_result(self._on_answer).on_failure(self._on_server_failed).on_log_line(self.log_line)
                        .start(replacing=self._server))

    def model_source(self) -> Path | None:
        """The run folder or file last given to :meth:`set_model_source` (loaded or loading)."""
        return self._source

    def is_loading(self) -> bool:
        return self._source is not None and self._info is None

    def add_image_files(self, paths: Sequence[str | Path]) -> None:
        names = [str(p) for p in paths]
        if names and self._host() is not None:  # the model is there: the files go in the request
            files = []
            for path in names:
                try:
                    files.append(sent_file(path))
                except OSError as exc:
                    self._add_error_row(path, f"cannot read ({exc.strerror or exc})")
            if files:
                self._request({"files": files, "invert": self.invert.mode()},
                              f"Classifying {wording.count(len(files), 'image')}…")
        elif names:
            self._request({"images": names, "invert": self.invert.mode()},
                          f"Classifying {wording.count(len(names), 'image')}…")

    def add_test_samples(self, count: int = TEST_SAMPLES) -> None:
        if self._info is not None and not self._info.has_test_set:
            self._fail("The model's card names no dataset, so there are no test samples to draw.")
            return
        self._request({"test_samples": int(count)}, f"Classifying {wording.count(count, 'test image')}…")

    def clear(self) -> None:
        for row in [*self._rows, *self._error_rows]:
            self._list.removeWidget(row)
            row.deleteLater()
        self._rows.clear()
        self._error_rows.clear()
        self._in_view = None
        self._placeholder.setVisible(True)

    def shutdown(self) -> None:
        """End the model's process and wait for it (the tab's model is gone, or the window closes)."""
        if self._server is not None:
            self._server.cancel(wait=True)
        self._end_server()

    # ---- drag and drop ---------------------------------------------------------------------
    def dragEnterEvent(self, event) -> None:  # noqa: N802 - Qt API
        # Ignored drags (a dataset folder, an .npz) go on to the window, which opens datasets.
        if any(is_image_file(p) or model_kind(p) for p in _local_paths(event.mimeData())):
            event.acceptProposedAction()
        else:
            event.ignore()

    def dropEvent(self, event) -> None:  # noqa: N802 - Qt API
        paths = _local_paths(event.mimeData())
        models = [p for p in paths if model_kind(p)]
        images = [p for p in paths if is_image_file(p)]
        if not (models or images):
            event.ignore()
            return
        event.acceptProposedAction()
        if models:
            self.set_model_source(model_source(models[0]))
        self.add_image_files(images)  # after a dropped model: they wait for it to load

    def closeEvent(self, event) -> None:  # noqa: N802 - Qt API
        self.shutdown()
        super().closeEvent(event)

    # ---- the predict process ---------------------------------------------------------------
    def _request(self, request: dict, status: str) -> None:
        if self._server is None and self._source is not None:  # a host's model whose connection dropped
            self._start_server()
        if self.is_loading():
            self._waiting.append(request)
            waiting = sum(len(r.get("images", r.get("files", ()))) + r.get("test_samples", 0) for r in self._waiting)
            self._say(f"{wording.count(waiting, 'image')} waiting for the model to load…")
            return
        if self._info is None or self._server is None:
            self._fail("Open a model first (a run folder or an exported file).")
            return
        self._next_id += 1
        self._say(status)
        self._server.ask({"id": self._next_id, **request})

    def _end_server(self) -> None:
        """Forget the model's process: its slots are disconnected, it is ended (SIGTERM ends even
        a model that is still loading) and deleted once it has."""
        server, self._server = self._server, None
        self._info = None
        if server is not None:
            server.discard()

    def _on_answer(self, line: dict) -> None:
        ready, answer = decode(ServeReady, line), decode(ServeAnswer, line)
        if ready is not None and ready.type == ServeReady.TYPE:
            self._on_model_loaded(ready)
        elif answer is not None and answer.type == "predictions":
            self._on_predictions(answer.predictions or [])
        elif answer is not None and answer.type == "error":
            message = answer.message or "failed"
            if answer.image:
                self._add_error_row(answer.image, message)
            else:
                self._fail(message)

    def _on_server_failed(self, reason: str) -> None:
        """The model's process ended without being asked to: it could not load the model, or died."""
        loading = self._info is None
        self._end_server()
        if not loading and self._host() is not None:  # the connection, most likely: the tab goes on
            self._waiting = []
            self._fail(f"{reason}; the model loads there again with the next images")
            return
        for button in (self._add_button, self._samples_button):
            button.setEnabled(False)
        source, self._source, self._waiting = self._source, None, []
        self._model_label.setText("No model.")
        self._fail(reason if loading else f"The model process ended: {reason}")
        if loading and source is not None and UNVERIFIED_SAVEDMODEL_FLAG in reason:
            self._ask_trust(source, reason)

    def _ask_trust(self, source: Path, reason: str) -> None:
        """A SavedModel we cannot vouch for: loading it runs its graph, so the user decides."""
        box = QMessageBox(QMessageBox.Icon.Warning, "Load an unverified SavedModel?",
                          f"{source.name} has no model card from Replica Studio that matches its files.\n\n"
                          "Loading a SavedModel runs the program inside it. Load it only if you trust "
                          "where it came from.", QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No,
                          self)
        box.setDefaultButton(QMessageBox.StandardButton.No)
        box.setDetailedText(reason)
        yes = QMessageBox.StandardButton.Yes
        box.buttonClicked.connect(
            lambda b: self.set_model_source(source, trusted=True) if box.standardButton(b) == yes else None)
        self.trust_box = box
        box.open()  # window-modal, not blocking

    def _host(self) -> str | None:
        """The SSH host the model is on (None: this computer)."""
        return split_run_key(str(self._source))[0] if self._source is not None else None

    def _on_model_loaded(self, info: ServeReady) -> None:
        self._info = info
        h, w, c = info.input_shape
        name = Path(info.model or split_run_key(str(self._source))[1]).name
        kind = _KIND_NAMES.get(info.kind, info.kind)
        description = f"{name}: {kind}, {w}×{h} {'grey' if c == 1 else 'colour'}, {len(info.class_names)} classes"
        self._model_label.setText(f"<b>{html.escape(description)}</b>")
        self._add_button.setEnabled(True)
        self._samples_button.setEnabled(info.has_test_set)
        self.invert.follow_model(info.dark_background)  # light digits on dark: inverts light images
        hint = DIGITS_HINT if info.dark_background else ""
        self._say(" ".join([*info.warnings, hint]).strip() or "Drop images here, or add test samples.")
        self.model_loaded.emit(description)
        waiting, self._waiting = self._waiting, []
        for request in waiting:
            self._request(request, "Classifying…")

    def _on_predictions(self, found: list) -> None:
        names = self._info.class_names if self._info else []
        predictions = []
        for data in found:
            try:
                predictions.append(Prediction.from_dict(data, names))
            except ValueError as exc:
                self._fail(str(exc))
        first = None
        for prediction in predictions:
            row = PredictionRow(prediction)
            self._insert_row(row)
            self._rows.append(row)
            first = first or row
        if first is not None:
            self._in_view = first
        self._say(f"{wording.count(len(self._rows), 'image')} classified.")
        self.predictions_ready.emit(predictions)

    def _add_error_row(self, source: str, message: str) -> None:
        row = ErrorRow(source, message)
        self._insert_row(row)
        self._in_view = row
        self._error_rows.append(row)
        self.image_failed.emit(source, message)

    def _insert_row(self, row: QWidget) -> None:
        # After the (hidden) placeholder and the rows already there, before the stretch.
        self._list.insertWidget(self._list.count() - 1, row)
        self._placeholder.setVisible(False)

    def _bring_into_view(self, *_range: int) -> None:
        row = self._in_view
        if row is not None and shiboken6.isValid(row):
            self._scroll.ensureWidgetVisible(row, 0, 0)

    def _fail(self, message: str) -> None:
        line = message.strip().splitlines()[0] if message.strip() else "failed"
        self._say(line, error=True)
        self.failed.emit(line)

    def _say(self, text: str, error: bool = False) -> None:
        self._status.setStyleSheet(ERROR_STYLE if error else "")
        self._status.setText(text)

    def open_model_file_dialog(self) -> None:
        """Ask for a .keras, .tflite or .onnx file (or a SavedModel's saved_model.pb) and try it."""
        path, _ = QFileDialog.getOpenFileName(self, "Open a model to try", self.last_dir,
                                              "Models (*.keras *.tflite *.onnx saved_model.pb)")
        if path:
            self.last_dir = str(Path(path).parent)
            self.set_model_source(model_source(path))

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

