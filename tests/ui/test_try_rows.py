"""The Try tab's rows as the user reads them, fed the model process's answers (no engine): the
file's own size beside what the model sees, whole names, the digits hint, new rows in view."""
from __future__ import annotations

from PySide6.QtGui import QImage

import numpy as np

from gui_app.core.predictions import Prediction
from gui_app.ui.tabs.prediction_rows import PredictionRow
from gui_app.ui.tabs.try_model import DIGITS_HINT, TryTab

DIGITS = [str(i) for i in range(10)]


def _ready(class_names, input_shape) -> dict:
    return {"type": "ready", "model": "/runs/a-run", "kind": "run", "class_names": class_names,
            "input_shape": input_shape, "has_test_set": True, "warnings": [],
            "dark_background": class_names == DIGITS}  # as the engine says of a digits run


def _predictions(source: str, n: int) -> dict:
    probabilities = np.full(10, 0.1, np.float32)
    prediction = Prediction(source, np.zeros((8, 8, 1), np.uint8), probabilities, DIGITS)
    return {"type": "predictions", "predictions": [prediction.to_dict() for _ in range(n)]}


def test_a_row_says_the_files_size_beside_what_the_model_sees_and_keeps_the_names_end(qtbot, tmp_path):
    panel = TryTab()
    qtbot.addWidget(panel)
    panel._on_answer(_ready(DIGITS, [8, 8, 1]))
    assert DIGITS_HINT in panel._status.text()  # a digits model: light strokes on a dark background
    photo = tmp_path / ("a-scanned-page-of-handwritten-digits-" * 3 + "seven.png")
    image = QImage(64, 48, QImage.Format.Format_RGB888)
    image.fill(0)
    assert image.save(str(photo))
    panel._on_answer(_predictions(str(photo), 1))
    [row] = panel.findChildren(PredictionRow)
    text = row.caption.text()
    # Was "8×8 grey" alone: the model's input, not the 64 px colour file.
    assert "file 64×48 colour" in text and "model sees 8×8 grey" in text
    assert "seven.png" in text and "…" in text and row.caption.toolTip() == str(photo)  # elided in the middle


def test_test_samples_say_what_the_model_sees_and_other_models_get_no_digits_hint(qtbot):
    panel = TryTab()
    qtbot.addWidget(panel)
    panel._on_answer(_ready([f"class {i}" for i in range(10)], [8, 8, 1]))
    assert DIGITS_HINT not in panel._status.text()
    panel._on_answer(_predictions("test image 3", 1))
    [row] = panel.findChildren(PredictionRow)
    assert "test image 3" in row.caption.text() and "as the model sees it: 8×8 grey" in row.caption.text()


def test_new_results_below_the_fold_are_scrolled_into_view(qtbot):
    panel = TryTab()
    qtbot.addWidget(panel)
    panel.resize(800, 400)
    panel.show()
    qtbot.waitExposed(panel)
    panel._on_answer(_ready(DIGITS, [8, 8, 1]))
    panel._on_answer(_predictions("test image 1", 6))
    bar = panel._scroll.verticalScrollBar()
    qtbot.waitUntil(lambda: bar.maximum() > 0)
    assert bar.value() == 0  # the first results start at the top
    panel._on_answer(_predictions("test image 2", 2))
    new = panel.findChildren(PredictionRow)[-2]
    qtbot.waitUntil(lambda: bar.value() > 0)
    top = new.mapTo(panel._scroll.widget(), new.rect().topLeft()).y()
    assert bar.value() <= top < bar.value() + panel._scroll.viewport().height()
