"""CompareDialog: runs side by side -- the configuration keys that differ and the final figures
(gui_app/core/comparison.py, as ``replica-studio compare`` prints them), their curves overlaid
(gui_app/ui/charts/compare_chart.py).

    CompareDialog.for_runs(run_dirs, parent)   # shown, non-modal; the run list's Compare… and a sweep's trials

One row per run, or per group of runs that differ only in their seed ("Group runs that differ
only in seed", on by default): a group shows mean ± std and its seeds, and on the chart its mean
line over a min-max band. Every column sorts, numbers by value. Export CSV… writes the CLI's
``--csv`` file (``Comparison.to_csv``); Open run asks the window to open the selected row's run
(``open_requested``; a group's first run). The runs are read off the GUI thread: reading
one decodes its whole events.jsonl, which takes a while for a long run.
"""
from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any, Sequence

from PySide6.QtCore import QSize, QSortFilterProxyModel, Qt, Signal
from PySide6.QtGui import QStandardItem, QStandardItemModel
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QMessageBox,
    QSplitter,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from gui_app.core import atomic_io
from gui_app.core.comparison import METRICS, Comparison, Row, RunFigures, compare, read_figures, value_text
from gui_app.core.wording import count, label
from gui_app.ui.charts.compare_chart import CompareChart
from gui_app.ui.screen_fit import ScreenFit
from gui_app.ui.workers.background import Background, Send

METRIC_TITLES = {"test_accuracy": "Test accuracy", "val_accuracy": "Val accuracy", "val_loss": "Val loss",
                 "steps": "Steps", "duration": "Time (s)"}
METRIC_TIPS = {"val_accuracy": "The last epoch's validation accuracy", "val_loss": "The last epoch's validation loss",
               "duration": "Seconds the run's processes worked (a resumed run's pauses left out)"}
SORT_ROLE = Qt.ItemDataRole.UserRole + 1  # what a cell sorts by: a number where it is one
ROW_ROLE = Qt.ItemDataRole.UserRole + 2  # on a row's first cell: its index in the comparison's rows


def read_all_figures(send: Send, run_dirs: list[str], cancelled: threading.Event) -> None:
    """The runs' figures (``comparison.read_figures``), read off the GUI thread
    (gui_app/ui/workers/background.py): sends the list, in the order asked; stops when ``cancelled``
    (the dialog closed: a long run reads in seconds)."""
    figures = []
    for path in run_dirs:
        if cancelled.is_set():
            return
        figures.append(read_figures(path))
    send(figures)


class CompareDialog(QDialog):
    open_requested = Signal(str)  # a run folder
    loaded = Signal()  # the runs were read and are shown (or could not be: the status line says why)

    def __init__(self, run_dirs: Sequence[str | Path], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.run_dirs = [str(Path(p)) for p in run_dirs]
        self.figures: list[RunFigures] = []
        self.comparison: Comparison | None = None
        self.setWindowTitle(f"Compare {len(self.run_dirs)} runs")
        ScreenFit(self, QSize(1000, 720))  # its buttons stay on a 1280x720 screen
        self.group_box = QCheckBox("&Group runs that differ only in seed")
        self.group_box.setChecked(True)
        self.group_box.setToolTip("One row for runs whose configurations differ only in training.seed: "
                                  "mean ± std in the table, the mean line and a min-max band on the chart")
        self.group_box.toggled.connect(self._show)
        self.status = QLabel(f"Reading {len(self.run_dirs)} runs…")
        top = QHBoxLayout()
        top.addWidget(self.group_box)
        top.addWidget(self.status, 1, Qt.AlignmentFlag.AlignRight)
        self.model = QStandardItemModel(self)
        self.sorted = QSortFilterProxyModel(self)
        self.sorted.setSourceModel(self.model)
        self.sorted.setSortRole(SORT_ROLE)
        self.table = QTableView()
        self.table.setModel(self.sorted)
        self.table.horizontalHeader().setSortIndicator(-1, Qt.SortOrder.AscendingOrder)  # the runs' order until a click
        self.table.setSortingEnabled(True)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setTabKeyNavigation(False)  # Tab leaves the table for the next control
        self.table.verticalHeader().setVisible(False)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.table.selectionModel().selectionChanged.connect(self._on_selection)
        self.table.doubleClicked.connect(lambda _: self._open_selected())
        self.chart = CompareChart()
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(self.table)
        split.addWidget(self.chart)
        split.setStretchFactor(1, 2)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        self.open_button = buttons.addButton("&Open run", QDialogButtonBox.ButtonRole.ActionRole)
        self.open_button.setToolTip("Show the selected row's run in the window (a group's first run)")
        self.open_button.clicked.connect(self._open_selected)
        self.csv_button = buttons.addButton("&Export CSV…", QDialogButtonBox.ButtonRole.ActionRole)
        self.csv_button.setToolTip("Write the table as CSV, numbers as numbers (as replica-studio compare --csv)")
        self.csv_button.clicked.connect(self._export_dialog)
        self.close_button = buttons.button(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        for button in (self.open_button, self.csv_button, self.close_button):
            button.setAutoDefault(False)  # Enter in the table does not press a button
            button.setEnabled(button is self.close_button)
        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addWidget(split, 1)
        layout.addWidget(buttons)
        order = [self.group_box, self.table, self.chart.curve_box, self.open_button, self.csv_button, self.close_button]
        for first, second in zip(order, order[1:]):
            QWidget.setTabOrder(first, second)
        cancelled = threading.Event()
        self.destroyed.connect(lambda *_: cancelled.set())
        self._reader = Background(self)
        self._reader.run(read_all_figures, self.run_dirs, cancelled, deliver=self._on_read, failed=self._on_failed,
                         name="FiguresReader")

    @classmethod
    def for_runs(cls, run_dirs: Sequence[str | Path], parent: QWidget | None = None) -> CompareDialog:
        """Open the comparison of ``run_dirs`` beside the window (non-modal, deleted when closed)."""
        dialog = cls(run_dirs, parent)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.show()
        return dialog

    # ---- what is shown ------------------------------------------------------------------------
    def _on_read(self, figures: list[RunFigures]) -> None:
        self.figures = figures
        self._show()
        self.loaded.emit()

    def _on_failed(self, exc: BaseException) -> None:
        if not isinstance(exc, (OSError, ValueError)):
            raise exc
        self.status.setText(f"Cannot compare: {exc}")
        self.loaded.emit()

    def _new_model(self) -> None:
        """A fresh model for the rows, the old one deleted whole. Not ``model.clear()``: that deletes
        the items in C++ while PySide keeps their Python wrappers (children of the model's) as
        live, so a QObject made later at one of their addresses came back from ``children()`` as
        a QStandardItem (seen: pyqtgraph's PlotItem failing in a window built after a regrouping)."""
        old, self.model = self.model, QStandardItemModel(self)
        self.sorted.setSourceModel(self.model)
        old.setParent(None)  # Python's now: deleted with its items, their wrappers with it
        del old

    def _show(self) -> None:
        if not self.figures:
            return
        self.comparison = result = compare(self.figures, group_seeds=self.group_box.isChecked())
        self._new_model()
        keys = result.keys
        header = ["Run", "Started", "Status", *(label(k) for k in keys), *(["Seeds"] if result.grouped else []),
                  *(METRIC_TITLES[m] for m in METRICS)]
        self.model.setHorizontalHeaderLabels(header)
        tips = ["", "", "", *keys, *(["training.seed"] if result.grouped else []),
                *(METRIC_TIPS.get(m, "") for m in METRICS)]
        for column, tip in enumerate(tips):
            self.model.horizontalHeaderItem(column).setToolTip(tip)
        for index, row in enumerate(result.rows):
            cells = [_names_cell(row), _started_cell(row), _cell(" / ".join(dict.fromkeys(r.status for r in row.runs))),
                     *(_cell(value_text(v), "" if v is None else v) for v in map(row.values.get, keys))]
            if result.grouped:
                cells.append(_cell(", ".join(value_text(s) for s in row.seeds)))
            for metric in METRICS:
                stat = row.stat(metric)
                cells.append(_cell(stat.text(0 if metric in ("steps", "duration") else 4), stat.mean))
            cells[0].setData(index, ROW_ROLE)
            self.model.appendRow(cells)
        self.chart.show_rows(result.rows, [_legend(row) for row in result.rows])
        groups = sum(len(row.runs) > 1 for row in result.rows)
        self.status.setText(f"{count(len(self.figures), 'run')}: {count(len(keys), 'setting')} "
                            f"{'differs' if len(keys) == 1 else 'differ'}"
                            + (f", {count(groups, 'seed group')}" if groups else ""))
        self.csv_button.setEnabled(True)
        self._on_selection()

    def selected_rows(self) -> list[int]:
        """The selected rows, as indices into the comparison's rows."""
        return [self.sorted.mapToSource(i).siblingAtColumn(0).data(ROW_ROLE)
                for i in self.table.selectionModel().selectedRows()]

    def _on_selection(self, *_: Any) -> None:
        rows = self.selected_rows()
        self.chart.highlight(set(rows))
        self.open_button.setEnabled(len(rows) == 1)

    def _open_selected(self) -> None:
        rows = self.selected_rows()
        if len(rows) == 1 and self.comparison is not None:
            self.open_requested.emit(str(self.comparison.rows[rows[0]].runs[0].run_dir))

    # ---- CSV ----------------------------------------------------------------------------------
    def export_csv(self, path: str | Path) -> None:
        """The table as ``replica-studio compare --csv`` writes it (the grouping as the checkbox says)."""
        if self.comparison is not None:
            atomic_io.write_text(path, self.comparison.to_csv(), durable=False)

    def _export_dialog(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "Export the comparison as CSV",
                                              str(Path(self.run_dirs[0]).parent / "comparison.csv"),
                                              "CSV files (*.csv)")
        if not path:
            return
        try:
            self.export_csv(path)
        except OSError as exc:
            QMessageBox.warning(self, "Cannot write the CSV file", f"{path}: {exc.strerror or exc}")
            return
        self.status.setText(f"Written to {path}")


def _cell(text: str, sort: Any = "") -> QStandardItem:
    """A cell sorting by ``sort``: a number by value, None (a figure the run never reached) after
    every value in ascending order, anything else (the default) by the text."""
    item = QStandardItem(text)
    if isinstance(sort, (int, float)) and not isinstance(sort, bool):
        item.setData(float(sort), SORT_ROLE)
    elif sort is not None:
        item.setData(text, SORT_ROLE)
    return item


def _names_cell(row: Row) -> QStandardItem:
    item = _cell(", ".join(run.run_dir.name for run in row.runs))
    item.setToolTip("\n".join(str(run.run_dir) for run in row.runs))
    return item


def _started_cell(row: Row) -> QStandardItem:
    started = min((run.started for run in row.runs if run.started), default=None)
    return _cell(time.strftime("%Y-%m-%d %H:%M", time.localtime(started)) if started else "", started)


def _legend(row: Row) -> str:
    first = row.runs[0].run_dir.name
    if len(row.runs) == 1:
        return first
    return f"{first} + {len(row.runs) - 1} more (seeds {', '.join(value_text(s) for s in row.seeds)})"
