"""The evaluation of a finished run: test loss and accuracy, a confusion-matrix heat map
(gui_app/ui/charts/confusion.py), a per-class precision/recall/F1 table and a gallery of
misclassified test images with their true and predicted labels.

It shows the run history's ``evaluation`` -- the live ``eval`` event, or the run's eval.json
(gui_app.core.rundir.read_history) -- once, when it changes, with the run's misclassified.npz:
read here, or, for a run on an SSH host (``HOST:RUN_DIR``), copied back from there
(gui_app.ui.workers.remote_gallery) and shown when it has come.
"""
from __future__ import annotations

import dataclasses
import math
from pathlib import Path

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QSize, QSortFilterProxyModel, Qt, Signal
from PySide6.QtGui import QFontMetrics, QIcon, QImage, QPixmap
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHeaderView,
    QLabel,
    QListView,
    QListWidget,
    QListWidgetItem,
    QSplitter,
    QTableView,
    QVBoxLayout,
    QWidget,
)

import numpy as np

from gui_app.core.events import ClassMetrics, Eval
from gui_app.core.history import Part
from gui_app.core.metrics import per_class_metrics
from gui_app.core.misclassified import checked_misclassified, load_misclassified
from gui_app.core.rundir import MISCLASSIFIED_FILE
from gui_app.core.ssh_hosts import split_run_key
from gui_app.ui.charts.confusion import ConfusionHeatmap
from gui_app.ui.charts.plot import theme_colors
from gui_app.ui.charts.run_view import RunView
from gui_app.ui.workers.remote_gallery import RemoteGallery

GALLERY_LIMIT = 200  # images shown; the rest are counted in the title
THUMBNAIL = 72
_ROOT = QModelIndex()  # the invisible root: a table's rows hang from it


def _parse_eval(event: Eval) -> tuple[np.ndarray, list[str]]:
    """The confusion matrix and class names of an eval event; ValueError naming the key."""
    rows = event.confusion_matrix
    try:
        matrix = np.asarray(rows, dtype=np.int64)
    except (TypeError, ValueError):
        raise ValueError("eval.confusion_matrix: must be a list of rows of counts") from None
    if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1] or matrix.shape[0] == 0:
        raise ValueError(f"eval.confusion_matrix: must be square; got shape {list(matrix.shape)}")
    names = event.class_names or [str(i) for i in range(len(matrix))]
    if len(names) != len(matrix):
        raise ValueError(f"eval.class_names: {len(names)} names for a {len(matrix)}x{len(matrix)} matrix")
    return matrix, [str(n) for n in names]


def names_are_indices(names: list[str]) -> bool:
    """True when the class names are just their indices ("0", "1", ... as for digits): the
    table then needs no separate "#" column."""
    return list(names) == [str(i) for i in range(len(names))]


class PerClassModel(QAbstractTableModel):
    """Rows = classes; DisplayRole is formatted text, UserRole the number (for sorting).

    When the names are the indices, the name column sorts by index ("10" after "9")."""

    HEADERS = ("#", "Class", "Precision", "Recall", "F1", "Support")
    FIELDS = ("index", "name", "precision", "recall", "f1", "support")  # of ClassMetrics

    def __init__(self) -> None:
        super().__init__()
        self._rows: list[ClassMetrics] = []
        self._numeric_names = False

    def set_rows(self, rows: list[ClassMetrics]) -> None:
        self.beginResetModel()
        self._rows = rows
        self._numeric_names = bool(rows) and names_are_indices([r.name for r in rows])
        self.endResetModel()

    def rowCount(self, parent=_ROOT) -> int:  # noqa: N802 (Qt override)
        return 0 if parent.isValid() else len(self._rows)

    def columnCount(self, parent=_ROOT) -> int:  # noqa: N802 (Qt override)
        return 0 if parent.isValid() else len(self.HEADERS)

    def data(self, index, role=Qt.ItemDataRole.DisplayRole):
        row = self._rows[index.row()]
        value = getattr(row, self.FIELDS[index.column()])
        if role == Qt.ItemDataRole.UserRole:
            if index.column() == 1 and self._numeric_names:
                return row.index
            return value
        if role == Qt.ItemDataRole.DisplayRole:
            if isinstance(value, float):
                return "–" if math.isnan(value) else f"{value:.3f}"
            return "" if value is None else str(value)
        if role == Qt.ItemDataRole.TextAlignmentRole and index.column() != 1:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return None

    def headerData(self, section, orientation, role=Qt.ItemDataRole.DisplayRole):  # noqa: N802
        if role == Qt.ItemDataRole.DisplayRole and orientation == Qt.Orientation.Horizontal:
            return self.HEADERS[section]
        return None


class EvaluationTab(QWidget, RunView):
    """Test loss/accuracy, a confusion-matrix heat map, a per-class precision/recall/F1 table
    and a gallery of misclassified test images with true and predicted labels. ``failed(str)``
    says, in one line naming the file or the key, why the run's evaluation cannot be shown."""

    failed = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._summary = QLabel(wordWrap=True)  # wraps rather than widen the window
        self._summary.setTextFormat(Qt.TextFormat.RichText)
        self._summary.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.heatmap = ConfusionHeatmap()

        self._per_class = PerClassModel()
        proxy = QSortFilterProxyModel(self)
        proxy.setSourceModel(self._per_class)
        proxy.setSortRole(Qt.ItemDataRole.UserRole)
        self.table = QTableView()
        self.table.setModel(proxy)
        self.table.setSortingEnabled(True)
        self.table.sortByColumn(0, Qt.SortOrder.AscendingOrder)
        self.table.setAlternatingRowColors(True)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.verticalHeader().setVisible(False)
        self.table.verticalHeader().setDefaultSectionSize(QFontMetrics(self.font()).height() + 6)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setStretchLastSection(False)
        number_width = QFontMetrics(self.font()).horizontalAdvance("Precision") + 16
        for column in range(2, len(PerClassModel.HEADERS)):
            header.setSectionResizeMode(column, QHeaderView.ResizeMode.Fixed)
            header.resizeSection(column, number_width)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
        # What the table needs to show every column; the splitter gives it that much when it first
        # shows (showEvent), and it scrolls sideways in less rather than widen the window.
        self._table_width = 4 * number_width + 140

        self._gallery_title = QLabel(wordWrap=True)
        self.gallery = QListWidget()
        self.gallery.setViewMode(QListView.ViewMode.IconMode)
        self.gallery.setIconSize(QSize(THUMBNAIL, THUMBNAIL))
        self.gallery.setGridSize(QSize(THUMBNAIL + 56, THUMBNAIL + 44))
        self.gallery.setResizeMode(QListView.ResizeMode.Adjust)
        self.gallery.setMovement(QListView.Movement.Static)
        self.gallery.setWordWrap(True)
        self.gallery.setUniformItemSizes(True)
        self.gallery.setMinimumHeight(THUMBNAIL + 56)

        heat = QWidget()
        heat_layout = QVBoxLayout(heat)
        heat_layout.setContentsMargins(0, 0, 0, 0)
        heat_layout.addWidget(self.heatmap, 1)
        heat_layout.addWidget(self.heatmap.hover)
        # The heat map takes the full height on the left; on the right the table is only as
        # tall as its rows (ten classes leave no empty table) and the gallery gets the rest.
        gallery = QWidget()
        gallery_layout = QVBoxLayout(gallery)
        gallery_layout.setContentsMargins(0, 0, 0, 0)
        gallery_layout.addWidget(self._gallery_title)
        gallery_layout.addWidget(self.gallery, 1)
        right = QSplitter(Qt.Orientation.Vertical)
        right.addWidget(self.table)
        right.addWidget(gallery)
        right.setStretchFactor(0, 3)
        right.setStretchFactor(1, 2)
        top = QSplitter(Qt.Orientation.Horizontal)
        top.addWidget(heat)
        top.addWidget(right)
        top.setStretchFactor(0, 3)
        top.setStretchFactor(1, 2)
        self._top_split = top
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 6, 8, 6)
        layout.addWidget(self._summary)
        layout.addWidget(top, 1)
        self._apply_palette()
        self._names: list[str] = []  # the class names of the evaluation shown
        self._remote = RemoteGallery(load_misclassified, parent=self)
        self._remote.fetched.connect(self._on_fetched)
        self.clear()

    # --- public API -------------------------------------------------------------------
    def clear(self) -> None:
        self._summary.setText("No evaluation yet: it appears when a run finishes its test-set evaluation.")
        self.heatmap.set_matrix(None, [])
        self._per_class.set_rows([])
        self._fit_table_height()
        self.gallery.clear()
        self._gallery_title.setText("Misclassified test images")

    def show_eval(self, evaluation: Eval, misclassified: dict | None = None) -> None:
        """Show an evaluation; ``misclassified`` holds ``x`` (uint8 [n, H, W, C]), ``y_true``,
        ``y_pred`` and ``confidence``. ValueError on a malformed evaluation, naming the key."""
        matrix, names = _parse_eval(evaluation)
        misclassified = checked_misclassified(misclassified)  # before anything is shown
        per_class = evaluation.per_class
        if len(per_class) == len(names):
            per_class = [dataclasses.replace(row, name=row.name or names[i]) for i, row in enumerate(per_class)]
        else:  # an old eval.json without them: derived from the matrix
            per_class = [ClassMetrics(index=row["class"], name=row["name"], precision=row["precision"],
                                      recall=row["recall"], f1=row["f1"], support=row["support"])
                         for row in per_class_metrics(matrix, names)]
        self._summary.setText(self._summary_text(evaluation, matrix, per_class))
        self.heatmap.set_matrix(matrix, names)
        self._per_class.set_rows(per_class)
        self.table.setColumnHidden(0, names_are_indices(names))  # "#" would repeat "Class"
        self._fit_table_height()
        self._names = names
        self._fill_gallery(misclassified, names)

    def has_evaluation(self) -> bool:
        return self.heatmap.matrix is not None

    # --- parts ------------------------------------------------------------------------
    @staticmethod
    def _summary_text(evaluation: Eval, matrix: np.ndarray, per_class: list[ClassMetrics]) -> str:
        parts = []
        if evaluation.loss is not None:
            parts.append(f"Test loss <b>{evaluation.loss:.4f}</b>")
        if evaluation.accuracy is not None:
            parts.append(f"accuracy <b>{100.0 * evaluation.accuracy:.2f}%</b>")
        f1 = [row.f1 for row in per_class if row.f1 is not None]
        if f1:
            parts.append(f"macro F1 <b>{float(np.mean(f1)):.3f}</b>")
        parts.append(f"{evaluation.examples or int(matrix.sum()):,} test examples")
        shares = evaluation.examples_per_replica
        if len(shares) > 1:
            parts.append("per replica " + " / ".join(f"{n:,}" for n in shares))
        return "  ·  ".join(parts)

    def _history_changed(self, changed: int) -> None:
        if changed & Part.EVALUATION:
            try:
                self._show_history_evaluation()
            except ValueError as exc:
                self.clear()
                self.failed.emit(str(exc))

    def _show_history_evaluation(self) -> None:
        history = self.history
        if history.evaluation is None:
            self.clear()
            return
        run_dir = history.run_dir
        host = split_run_key(run_dir)[0] if run_dir else None
        here = run_dir if host is None else None  # a folder on this computer
        misclassified = load_misclassified(Path(here) / MISCLASSIFIED_FILE) if here else None  # names the file
        try:
            self.show_eval(history.evaluation, misclassified)
        except ValueError as exc:
            where = history.evaluation_source
            raise ValueError(f"{where}: {exc}" if where else str(exc)) from None
        if host is not None and run_dir:  # a host comes from a run key: run_dir is set
            self._gallery_title.setText(f"Misclassified test images: copying them from {host}…")
            self._remote.fetch(run_dir)

    def _on_fetched(self, key: str, misclassified: dict | None, problem: str) -> None:
        """A host's run's images came back (or why not): shown if its evaluation still is."""
        if self.history.run_dir != key or not self.has_evaluation():
            return
        self._fill_gallery(misclassified, self._names)
        if problem:
            self._gallery_title.setText(f"Misclassified test images: not copied back ({problem})")

    def _fit_table_height(self) -> None:
        """No taller than its rows; many classes scroll in the space the splitter gives it."""
        rows = max(self._per_class.rowCount(), 1)
        self.table.setMaximumHeight(self.table.horizontalHeader().sizeHint().height()
                                    + rows * self.table.verticalHeader().defaultSectionSize()
                                    + 2 * self.table.frameWidth())

    def _fill_gallery(self, misclassified: dict | None, names: list[str]) -> None:
        self.gallery.clear()
        if misclassified is None or len(misclassified["y_true"]) == 0:
            self._gallery_title.setText("Misclassified test images: none saved for this run")
            return
        x, y_true, y_pred = misclassified["x"], misclassified["y_true"], misclassified["y_pred"]
        confidence = misclassified["confidence"]
        shown = min(len(y_true), GALLERY_LIMIT)
        total = len(y_true)
        count = f"{shown} of {total}" if shown < total else f"{total}"
        self._gallery_title.setText(f"Misclassified test images ({count}): true → predicted, model confidence")

        def name(i: int) -> str:
            return names[i] if 0 <= i < len(names) else str(i)

        for i in range(shown):
            true, pred, conf = name(int(y_true[i])), name(int(y_pred[i])), confidence[i]
            conf_text = "" if math.isnan(conf) else f"{100.0 * conf:.0f}%"
            item = QListWidgetItem(QIcon(_thumbnail(x[i])), f"{true}\n→ {pred} {conf_text}".rstrip())
            item.setToolTip(f"true: {true}\npredicted: {pred}" + (f" ({conf_text} confident)" if conf_text else ""))
            self.gallery.addItem(item)

    def _apply_palette(self) -> None:
        background, foreground = theme_colors(self)
        self.heatmap.apply_palette(background, foreground)

    def showEvent(self, event) -> None:  # noqa: N802 (Qt override)
        super().showEvent(event)
        if not getattr(self, "_split_sized", False):  # once: the heat map gets 60 % of the width,
            self._split_sized = True  # less where the table would not show all its columns
            width = self._top_split.width()
            table = min(max(width - int(width * 0.6), self._table_width), width // 2)
            self._top_split.setSizes([width - table, table])

    def changeEvent(self, event) -> None:  # noqa: N802 (Qt override)
        super().changeEvent(event)
        if event.type() == event.Type.PaletteChange and hasattr(self, "heatmap"):
            self._apply_palette()


def _thumbnail(image: np.ndarray) -> QPixmap:
    """An [H, W, C] uint8 image as a THUMBNAIL-sized pixmap (pixels kept sharp when enlarged)."""
    image = np.ascontiguousarray(image[..., 0] if image.shape[-1] == 1 else image[..., :3])
    height, width = image.shape[:2]
    if image.ndim == 2:
        qimage = QImage(image.data, width, height, width, QImage.Format.Format_Grayscale8)
    else:
        qimage = QImage(image.data, width, height, 3 * width, QImage.Format.Format_RGB888)
    pixmap = QPixmap.fromImage(qimage.copy())  # copy: the QImage does not own the numpy buffer
    mode = (Qt.TransformationMode.FastTransformation if max(height, width) < THUMBNAIL
            else Qt.TransformationMode.SmoothTransformation)
    return pixmap.scaled(THUMBNAIL, THUMBNAIL, Qt.AspectRatioMode.KeepAspectRatio, mode)
