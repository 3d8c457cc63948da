"""EvaluationTab: eval events, live or from a run directory (eval.json + misclassified.npz), as
the run's history holds them."""
from __future__ import annotations

import json
import os
import re

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtCore import QPointF, Qt

import numpy as np
import pytest

from gui_app.core import events as ev
from gui_app.core.history import RunHistory
from gui_app.core.metrics import per_class_metrics
from gui_app.core.rundir import read_history
from gui_app.ui.tabs.evaluation import GALLERY_LIMIT, EvaluationTab

NAMES = [f"digit {i}" for i in range(10)]


def as_eval(event: dict) -> ev.Eval:
    return ev.decode({"type": "eval", **event})


def eval_event(classes: int = 10, seed: int = 0, per_class: bool = True) -> dict:
    rng = np.random.default_rng(seed)
    matrix = rng.integers(0, 5, (classes, classes)) + np.diag(rng.integers(20, 40, classes))
    names = NAMES if classes == 10 else [f"c{i}" for i in range(classes)]
    event = {"loss": 0.25, "accuracy": float(np.trace(matrix) / matrix.sum()), "examples": int(matrix.sum()),
             "confusion_matrix": matrix.tolist(), "class_names": names,
             "examples_per_replica": [int(matrix.sum()) - 10, 10]}
    if per_class:
        event["per_class"] = per_class_metrics(matrix, names)
    return event


def misclassified(n: int) -> dict:
    rng = np.random.default_rng(1)
    y_true = rng.integers(0, 10, n)
    return {"x": rng.integers(0, 255, (n, 8, 8, 1), dtype=np.uint8), "y_true": y_true,
            "y_pred": (y_true + 1) % 10, "confidence": rng.uniform(0.2, 1.0, n)}


@pytest.fixture
def view(qtbot) -> EvaluationTab:
    widget = EvaluationTab()
    qtbot.addWidget(widget)
    return widget


def failures(view: EvaluationTab) -> list[str]:
    messages: list[str] = []
    view.failed.connect(messages.append)
    return messages


def table_column(view: EvaluationTab, column: int) -> list:
    model = view.table.model()
    return [model.index(r, column).data(Qt.ItemDataRole.UserRole) for r in range(model.rowCount())]


def test_shows_the_matrix_table_and_summary(view):
    event = eval_event()
    view.show_eval(as_eval(event))
    matrix = view.heatmap.matrix
    assert matrix.shape == (10, 10)
    assert (matrix == np.array(event["confusion_matrix"])).all()
    assert matrix.sum() == event["examples"]
    assert view.table.model().rowCount() == 10
    assert table_column(view, 1) == NAMES
    assert table_column(view, 2) == pytest.approx([row["precision"] for row in event["per_class"]])
    assert view.table.model().index(0, 2).data() == f"{event['per_class'][0]['precision']:.3f}"
    assert "0.2500" in view._summary.text() and f"{100 * event['accuracy']:.2f}%" in view._summary.text()
    assert view.heatmap._texts == []  # the counts are written when the map is first on screen
    view.show()
    assert len(view.heatmap._texts) == 100 and view.heatmap._texts[3].toPlainText() == str(matrix[0, 3])


def test_per_class_is_derived_when_the_event_has_none(view):
    event = eval_event(per_class=False)
    view.show_eval(as_eval(event))
    matrix = np.array(event["confusion_matrix"])
    expected = np.diag(matrix) / matrix.sum(axis=0)
    assert table_column(view, 2) == pytest.approx(expected.tolist())
    assert table_column(view, 5) == matrix.sum(axis=1).tolist()


def test_precision_of_a_never_predicted_class_is_zero():
    rows = per_class_metrics(np.array([[3, 0], [2, 0]]), ["a", "b"])
    assert rows[0]["precision"] == pytest.approx(0.6) and rows[0]["recall"] == 1.0
    assert rows[1] == {"class": 1, "name": "b", "precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 2}


def test_table_sorts_by_number(view):
    view.show_eval(as_eval(eval_event()))
    view.table.sortByColumn(4, Qt.SortOrder.DescendingOrder)
    f1 = table_column(view, 4)
    assert f1 == sorted(f1, reverse=True)


def test_index_column_only_when_the_names_are_not_the_indices(view):
    view.show_eval(as_eval(eval_event()))  # "digit 0", ...: "#" and "Class" say different things
    assert not view.table.isColumnHidden(0)
    matrix = np.diag(np.arange(1, 13))
    view.show_eval(as_eval({"confusion_matrix": matrix.tolist(), "class_names": [str(i) for i in range(12)]}))
    assert view.table.isColumnHidden(0)  # "0", "1", ...: "#" would repeat "Class"
    view.table.sortByColumn(1, Qt.SortOrder.DescendingOrder)
    model = view.table.model()
    assert [model.index(r, 1).data() for r in range(3)] == ["11", "10", "9"]  # by number, not text
    view.show_eval(as_eval(eval_event()))
    assert not view.table.isColumnHidden(0)


def test_gallery_has_one_item_per_misclassified_image(view):
    view.show_eval(as_eval(eval_event()), misclassified(12))
    assert view.gallery.count() == 12
    item = view.gallery.item(0)
    assert "→" in item.text() and not item.icon().isNull()
    view.show_eval(as_eval(eval_event()), misclassified(GALLERY_LIMIT + 5))
    assert view.gallery.count() == GALLERY_LIMIT
    assert f"{GALLERY_LIMIT} of {GALLERY_LIMIT + 5}" in view._gallery_title.text()
    view.show_eval(as_eval(eval_event()))
    assert view.gallery.count() == 0


def test_hundred_classes_have_no_cell_text(view):
    view.show_eval(as_eval(eval_event(classes=100)))
    assert view.heatmap.matrix.shape == (100, 100)
    assert view.heatmap._texts == [] and view.table.model().rowCount() == 100


def test_a_run_folder_shows_its_eval_json_and_misclassified(view, tmp_path):
    event = eval_event()
    (tmp_path / "eval.json").write_text(json.dumps(event))
    np.savez(tmp_path / "misclassified.npz", **misclassified(7))
    view.set_history(read_history(tmp_path))
    assert view.has_evaluation()
    assert (view.heatmap.matrix == np.array(event["confusion_matrix"])).all()
    assert view.gallery.count() == 7


def test_the_live_eval_event_is_shown_with_the_runs_misclassified_images(view, tmp_path):
    np.savez(tmp_path / "misclassified.npz", **misclassified(4))  # the engine writes it before the event
    history = RunHistory()
    view.set_history(history)
    history.add([ev.RunStarted(run_dir=str(tmp_path), config={})])
    assert not view.has_evaluation()
    history.add([as_eval(eval_event())])
    assert view.has_evaluation() and view.gallery.count() == 4


def test_a_run_without_an_evaluation_shows_none(view, tmp_path):
    view.show_eval(as_eval(eval_event()))
    view.set_history(read_history(tmp_path))
    assert view.heatmap.matrix is None and view.table.model().rowCount() == 0


def test_bad_files_give_one_line_errors_naming_them(view, tmp_path):
    (tmp_path / "eval.json").write_text("{not json")
    history = read_history(tmp_path)
    assert history.evaluation is None and len(history.problems) == 1 and "eval.json" in history.problems[0]
    failed = failures(view)
    (tmp_path / "eval.json").write_text(json.dumps({"confusion_matrix": [[1, 2], [3]]}))
    view.set_history(read_history(tmp_path))
    assert len(failed) == 1 and "eval.json: eval.confusion_matrix" in failed[-1]
    (tmp_path / "eval.json").write_text(json.dumps(eval_event()))
    np.savez(tmp_path / "misclassified.npz", x=np.zeros((1, 2, 2), np.uint8))
    view.set_history(read_history(tmp_path))
    assert "misclassified.npz: missing array 'y_true'" in failed[-1]
    np.savez(tmp_path / "misclassified.npz", **{**misclassified(3), "y_pred": np.zeros(2)})
    view.set_history(read_history(tmp_path))
    assert re.search(r"misclassified.npz: array 'y_pred': expected 3 numbers", failed[-1])
    assert len(failed) == 3 and view.heatmap.matrix is None  # nothing half-shown
    bad = {**misclassified(2), "x": np.zeros((2, 4, 4, 2), np.uint8)}
    view.clear()
    with pytest.raises(ValueError, match=r"misclassified: array 'x': .*\[2, 4, 4, 2\]"):
        view.show_eval(as_eval(eval_event()), bad)
    assert view.heatmap.matrix is None  # nothing half-shown


def test_class_names_must_match_the_matrix(view):
    event = eval_event()
    event["class_names"] = NAMES[:3]
    with pytest.raises(ValueError, match="eval.class_names"):
        view.show_eval(as_eval(event))


def test_clear(view):
    view.show_eval(as_eval(eval_event()), misclassified(3))
    view.clear()
    assert view.heatmap.matrix is None
    assert view.table.model().rowCount() == 0 and view.gallery.count() == 0


def test_hover_names_the_cell_and_cell_text_hides_when_cramped(view, qtbot):
    event = eval_event()
    view.resize(1100, 760)
    view.show()
    qtbot.waitExposed(view)
    view.show_eval(as_eval(event))
    heatmap = view.heatmap
    assert all(text.isVisible() for text in heatmap._texts)
    heatmap._on_mouse_moved(heatmap.plot.vb.mapViewToScene(QPointF(2.5, 3.5)))  # column 2, row 3
    count = event["confusion_matrix"][3][2]
    assert heatmap.hover.text().startswith(f"true digit 3, predicted digit 2: {count}")
    view.resize(260, 420)
    qtbot.waitUntil(lambda: not any(text.isVisible() for text in heatmap._texts), timeout=2000)
