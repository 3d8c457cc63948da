"""RunsPanel: the runs in the runs folder, read with ``gui_app.core.rundir.list_runs``.

Open one to see its charts and evaluation again, select two to overlay them, resume a run
that was stopped, whose process died, or that failed after writing a checkpoint, export a finished run's model. A failed run shows
its one-line reason. The buttons are also in the list's context menu.
"""
from __future__ import annotations

import time
from pathlib import Path

from PySide6.QtCore import QUrl, Qt, Signal
from PySide6.QtGui import QColor, QDesktopServices
from PySide6.QtWidgets import (QAbstractItemView, QHBoxLayout, QHeaderView, QMenu, QPushButton, QTreeWidget,
                               QTreeWidgetItem, QVBoxLayout, QWidget)

from gui_app.core.config import RunConfig
from gui_app.core.rundir import RunInfo, list_runs

COLUMNS = ["Status", "Dataset", "Model", "Strategy", "Test accuracy", "Started", "Note"]
STATUS_COLOURS = {"completed": "#2e7d32", "stopped": "#b26a00", "interrupted": "#b26a00", "failed": "#c62828",
                  "running": "#1565c0"}
PATH_ROLE = Qt.ItemDataRole.UserRole


def describe_strategy(config: RunConfig | None) -> str:
    if config is None:
        return "?"
    strategy = config.strategy
    if strategy.name == "mirrored":
        devices = strategy.devices
        return f"mirrored ×{len(devices)} ({', '.join(devices)})" if devices else "mirrored (all GPUs)"
    if strategy.name == "one_device":
        return f"one device ({strategy.device or 'auto'})"
    return strategy.name


class _Item(QTreeWidgetItem):
    """Sorts the date and accuracy columns by value, not by text."""

    def __lt__(self, other: QTreeWidgetItem) -> bool:
        column = self.treeWidget().sortColumn() if self.treeWidget() else 0
        mine, theirs = self.data(column, Qt.ItemDataRole.UserRole + 1), other.data(column, Qt.ItemDataRole.UserRole + 1)
        if mine is not None and theirs is not None:
            return mine < theirs
        return self.text(column) < other.text(column)


class RunsPanel(QWidget):
    open_requested = Signal(str)
    overlay_requested = Signal(str, str)  # main run, run drawn on top
    resume_requested = Signal(str)
    export_requested = Signal(str)

    def __init__(self, runs_dir: str | Path, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.runs_dir = Path(runs_dir)
        self._active_run: str | None = None
        self._busy = False
        self._runs: dict[str, RunInfo] = {}
        self._notes: dict[str, str] = {}  # why a run ended, when its events cannot say (a crash)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self.tree = QTreeWidget()
        self.tree.setHeaderLabels(COLUMNS)
        self.tree.setRootIsDecorated(False)
        self.tree.setAlternatingRowColors(True)
        self.tree.setSortingEnabled(True)
        self.tree.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.tree.header().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.tree.header().setStretchLastSection(True)
        self.tree.itemSelectionChanged.connect(self._update_buttons)
        self.tree.itemDoubleClicked.connect(self._on_double_clicked)
        self.tree.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.tree.customContextMenuRequested.connect(self._on_context_menu)
        layout.addWidget(self.tree, 1)
        row = QHBoxLayout()
        self.open_button = self._button(row, "Open", "Show the selected run's charts and evaluation",
                                        lambda: self.open_requested.emit(self.selected_paths()[0]))
        self.overlay_button = self._button(row, "Overlay", "Draw the second selected run over the first",
                                           lambda: self.overlay_requested.emit(*self.selected_paths()[:2]))
        self.resume_button = self._button(row, "Resume", "Continue a stopped, interrupted or failed run from its checkpoint",
                                          lambda: self.resume_requested.emit(self.selected_paths()[0]))
        self.export_button = self._button(row, "Export…", "Export the selected run's trained model "
                                                          "(Keras, SavedModel, TensorFlow Lite, ONNX)",
                                          lambda: self.export_requested.emit(self.selected_paths()[0]))
        self.folder_button = self._button(row, "Show folder", "Open the run directory in the file manager",
                                          self._show_folder)
        row.addStretch(1)
        self._button(row, "Refresh", "Read the runs folder again", self.refresh)
        layout.addLayout(row)
        self.refresh()

    @staticmethod
    def _button(row: QHBoxLayout, text: str, tip: str, slot) -> QPushButton:
        button = QPushButton(text)
        button.setToolTip(tip)
        button.clicked.connect(slot)
        row.addWidget(button)
        return button

    # ---- public ----------------------------------------------------------------------
    def set_runs_dir(self, runs_dir: str | Path) -> None:
        self.runs_dir = Path(runs_dir)
        self.refresh()

    def set_active_run(self, run_dir: str | None) -> None:
        """The run the engine is working on shows as running (on disk it looks interrupted)."""
        self._active_run = str(Path(run_dir)) if run_dir else None
        self.refresh()

    def set_note(self, run_dir: str | Path, note: str) -> None:
        """Show why a run ended when its events.jsonl cannot: a process that crashed or was
        killed wrote no run_finished (on disk it is "interrupted", and stays resumable)."""
        self._notes[str(Path(run_dir))] = note
        self.refresh()

    def set_busy(self, busy: bool) -> None:
        """While a run is active nothing else is opened or resumed: one run at a time."""
        self._busy = busy
        self._update_buttons()

    def refresh(self) -> None:
        selected = set(self.selected_paths())
        self.tree.setSortingEnabled(False)
        self.tree.clear()
        self._runs = {str(info.path): info for info in list_runs(self.runs_dir)}
        for path, info in self._runs.items():
            item = self._make_item(info)
            self.tree.addTopLevelItem(item)
            item.setSelected(path in selected)
        self.tree.setSortingEnabled(True)
        if self.tree.sortColumn() < 0 or not selected:
            self.tree.sortItems(COLUMNS.index("Started"), Qt.SortOrder.DescendingOrder)
        self._update_buttons()

    def runs(self) -> list[RunInfo]:
        return list(self._runs.values())

    def status_of(self, run_dir: str | Path) -> str | None:
        info = self._runs.get(str(Path(run_dir)))
        if info is None:
            return None
        return "running" if str(info.path) == self._active_run else info.status

    def selected_paths(self) -> list[str]:
        return [item.data(0, PATH_ROLE) for item in self.tree.selectedItems()]

    def select(self, *run_dirs: str | Path) -> None:
        wanted = {str(Path(p)) for p in run_dirs}
        for i in range(self.tree.topLevelItemCount()):
            item = self.tree.topLevelItem(i)
            item.setSelected(item.data(0, PATH_ROLE) in wanted)

    # ---- rows ------------------------------------------------------------------------
    def _make_item(self, info: RunInfo) -> QTreeWidgetItem:
        config = info.config
        status = "running" if str(info.path) == self._active_run else info.status
        if status in ("stopped", "interrupted", "failed") and info.total_steps and info.resumable:
            shown_status = f"{status} ({info.step}/{info.total_steps})"
        else:
            shown_status = status
        accuracy = f"{info.test_accuracy:.2%}" if isinstance(info.test_accuracy, (int, float)) else ""
        started = time.strftime("%Y-%m-%d %H:%M", time.localtime(info.started)) if info.started else ""
        note = info.message or self._notes.get(str(info.path), "")
        item = _Item([shown_status, config.dataset.name if config else "?", config.model.name if config else "?",
                      describe_strategy(config), accuracy, started, note])
        item.setData(0, PATH_ROLE, str(info.path))
        item.setData(4, Qt.ItemDataRole.UserRole + 1, info.test_accuracy if accuracy else -1.0)
        item.setData(5, Qt.ItemDataRole.UserRole + 1, info.started or 0.0)
        item.setForeground(0, QColor(STATUS_COLOURS.get(status, "#555555")))
        item.setToolTip(0, str(info.path))
        if note:
            item.setToolTip(6, note)
        if config is None:
            item.setToolTip(1, "config.json is missing or unreadable")
        return item

    def _update_buttons(self) -> None:
        paths = self.selected_paths()
        one = len(paths) == 1
        self.open_button.setEnabled(one and not self._busy)
        self.overlay_button.setEnabled(len(paths) == 2 and not self._busy)
        self.folder_button.setEnabled(one)
        info = self._runs.get(paths[0]) if one else None
        self.export_button.setEnabled(bool(info and info.has_model))
        self.resume_button.setEnabled(bool(info and info.resumable and not self._busy
                                           and str(info.path) != self._active_run))
        # A failed run resumes from its last good checkpoint: say so where the user decides.
        self.resume_button.setToolTip(
            "Continue from the last good checkpoint (lower the batch or the learning rate first if it ran "
            "out of memory or diverged)" if info and info.status == "failed" and info.resumable else
            "Continue a stopped, interrupted or failed run from its checkpoint")

    def _on_double_clicked(self, item: QTreeWidgetItem, _column: int) -> None:
        if not self._busy:  # the charts belong to the live run
            self.open_requested.emit(item.data(0, PATH_ROLE))

    def _on_context_menu(self, position) -> None:
        if not self.selected_paths():
            return
        menu = QMenu(self)
        for button in (self.open_button, self.overlay_button, self.resume_button, self.export_button,
                       self.folder_button):
            menu.addAction(button.text(), button.click).setEnabled(button.isEnabled())
        menu.exec(self.tree.viewport().mapToGlobal(position))

    def _show_folder(self) -> None:
        QDesktopServices.openUrl(QUrl.fromLocalFile(self.selected_paths()[0]))
