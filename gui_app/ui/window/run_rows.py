"""The run list's rows: what a row shows for a run (:func:`fill_row`) and where it goes in the
current sort (:func:`insert_sorted`, :func:`move_sorted`, :func:`resort`).

Qt's own sorting would re-sort every row through a Python comparison at each batch of a fill
(35 ms for 1,000 rows): rows are placed by :func:`sort_key` instead (a binary search), and a
click on a header sorts them once.
"""
from __future__ import annotations

import time

from PySide6.QtCore import QItemSelection, QItemSelectionModel, Qt
from PySide6.QtGui import QColor, QIcon
from PySide6.QtWidgets import QStyle, QTreeWidget, QTreeWidgetItem

from gui_app.core.backends.base import JobState, run_status
from gui_app.core.live_runs import RunProcess
from gui_app.core.rundir import RunInfo, has_checkpoint
from gui_app.core.wording import describe_strategy, for_people
from gui_app.ui.colors import ERROR_COLOR, WARNING_COLOR

# The Note stretches, last: a long failure message before the Host column pushed it off the right edge.
COLUMNS = ["Status", "Dataset", "Model", "Strategy", "Test accuracy", "Started", "Host", "Note"]
STATUS_COLOURS = {"completed": "#2e7d32", "stopped": WARNING_COLOR, "interrupted": WARNING_COLOR, "failed": ERROR_COLOR,
                  "running": "#1565c0", "cancelled": WARNING_COLOR, "timeout": WARNING_COLOR}
PATH_ROLE = Qt.ItemDataRole.UserRole
SORT_ROLE = Qt.ItemDataRole.UserRole + 1  # the value a column sorts by, where its text would sort wrongly
ACCURACY, STARTED, NOTE, HOST = (COLUMNS.index(name) for name in ("Test accuracy", "Started", "Note", "Host"))
ATTACHED_TIP = "This window follows this run (Stop, Pause and Continue act on it)"


def sort_key(item: QTreeWidgetItem, column: int) -> tuple:
    """What a row sorts by in ``column``: the value behind the date and accuracy columns, the
    text elsewhere; the path breaks ties, so equal rows keep one order."""
    value = item.data(column, SORT_ROLE)
    return (value if value is not None else item.text(column), item.data(0, PATH_ROLE))


def fill_row(item: QTreeWidgetItem, info: RunInfo, *, attached: bool, process: RunProcess | None, resumable: bool,
             host: str, note: str, style: QStyle, job: tuple[str, JobState] | None = None) -> None:
    """Show ``info`` in ``item``: ``attached`` when the window follows the run, ``process`` the
    one running it now, ``host`` where its process ran when another machine, ``note`` why it
    ended when its events cannot say, ``job`` its Slurm job and state (a run submitted to Slurm:
    "pending (Resources)" while it waits, Slurm's word for an end its events do not tell)."""
    config = info.config
    path = str(info.path)
    if attached or process is not None:
        status = "running"
    else:  # Slurm's word where the events cannot tell (gui_app/core/backends/slurm.py: the rule runs lists by too)
        status = run_status(info.status, job[1] if job is not None else None)
    if status in ("stopped", "interrupted", "failed") and info.total_steps and resumable:
        shown_status = f"{status} ({info.step}/{info.total_steps})"
    else:
        shown_status = status
    accuracy = f"{info.test_accuracy:.2%}" if isinstance(info.test_accuracy, (int, float)) else ""
    started = time.strftime("%Y-%m-%d %H:%M", time.localtime(info.started)) if info.started else ""
    note = for_people(info.message or note)
    if info.trial:  # a sweep's trial: its name first (there is no name column)
        note = f"{info.trial}: {note}" if note else info.trial
    texts = [shown_status, config.dataset.name if config else "?", config.model.name if config else "?",
             describe_strategy(config.strategy) if config else "?", accuracy, started, host, note]
    for column, text in enumerate(texts):
        item.setText(column, text)
    item.setData(0, PATH_ROLE, path)
    item.setData(ACCURACY, SORT_ROLE, info.test_accuracy if accuracy else -1.0)
    item.setData(STARTED, SORT_ROLE, info.started or 0.0)
    item.setForeground(0, QColor(STATUS_COLOURS.get(status.split(" (")[0], "#555555")))
    item.setIcon(0, style.standardIcon(QStyle.StandardPixmap.SP_MediaPlay) if attached else QIcon())
    if attached:
        item.setToolTip(0, f"{ATTACHED_TIP}\n{path}")
    elif process is not None:
        item.setToolTip(0, f"Running (process {process.pid} on {process.host}); double-click or Attach to "
                           f"follow it\n{path}")
    elif job is not None:
        item.setToolTip(0, f"{job[1].scheduler} job {job[0]}: {job[1].describe()}\n{path}")
    else:
        item.setToolTip(0, path)
    item.setToolTip(NOTE, note)
    item.setToolTip(1, "config.json is missing or unreadable" if config is None else "")


def _sort(tree: QTreeWidget) -> tuple[int, bool]:
    header = tree.header()
    return header.sortIndicatorSection(), header.sortIndicatorOrder() == Qt.SortOrder.DescendingOrder


def insert_sorted(tree: QTreeWidget, item: QTreeWidgetItem) -> None:
    """Put a row where the current sort puts it (binary search over the rows shown)."""
    column, descending = _sort(tree)
    key = sort_key(item, column)
    lo, hi = 0, tree.topLevelItemCount()
    while lo < hi:
        mid = (lo + hi) // 2
        row = tree.topLevelItem(mid)
        assert row is not None  # mid < topLevelItemCount()
        other = sort_key(row, column)
        if (other > key) if descending else (other < key):
            lo = mid + 1
        else:
            hi = mid
    tree.insertTopLevelItem(lo, item)


def move_sorted(tree: QTreeWidget, item: QTreeWidgetItem) -> None:
    """A row whose sort value changed goes to its new place, still selected and current if it was."""
    selected, current = item.isSelected(), tree.currentItem() is item
    tree.takeTopLevelItem(tree.indexOfTopLevelItem(item))
    insert_sorted(tree, item)
    if current:
        tree.setCurrentItem(item, 0, QItemSelectionModel.SelectionFlag.NoUpdate)
    if selected:
        item.setSelected(True)


def resort(tree: QTreeWidget) -> None:
    """Sort every row once by the header's indicator, keeping the selection and the current row."""
    column, descending = _sort(tree)
    selected, current = tree.selectedItems(), tree.currentItem()
    items = tree.invisibleRootItem().takeChildren()
    items.sort(key=lambda item: sort_key(item, column), reverse=descending)
    tree.addTopLevelItems(items)
    if current is not None:
        tree.setCurrentItem(current, 0, QItemSelectionModel.SelectionFlag.NoUpdate)
    select_exactly(tree, selected)


def select_exactly(tree: QTreeWidget, items: list[QTreeWidgetItem]) -> None:
    """Select exactly ``items`` with one selection change (one signal, not one per row)."""
    selection = QItemSelection()
    for item in items:
        index = tree.indexFromItem(item)
        selection.select(index, index)
    flags = QItemSelectionModel.SelectionFlag.ClearAndSelect | QItemSelectionModel.SelectionFlag.Rows
    tree.selectionModel().select(selection, flags)


EXPORT_TIP = "Export the selected run's trained model (Keras, SavedModel, TensorFlow Lite, ONNX)"


def bundle_resume_tip(info: RunInfo | None, resumable: bool) -> str:
    """Why a bundle's run can or cannot be resumed (Resume's tooltip, here and in the Run menu)."""
    if resumable:
        return ("Continue the bundle's run from its checkpoint, in a new run folder of the runs folder "
                "(the bundle is not changed)")
    if info is not None and not has_checkpoint(info.path):
        return "This bundle holds no checkpoints: make it with replica-studio bundle --with-checkpoints to resume it"
    return "The bundle's run completed: there is nothing to resume"


def resume_tip(info: RunInfo | None, resumable: bool, bundle: bool) -> str:
    """Resume's tooltip for the run selected (a run bundle's: :func:`bundle_resume_tip`)."""
    if bundle:
        return bundle_resume_tip(info, resumable)
    if info is not None and info.status == "failed" and resumable:  # say so where the user decides
        return ("Continue from the last good checkpoint (lower the batch or the learning rate first if it ran "
                "out of memory or diverged)")
    return "Continue a stopped, interrupted or failed run from its checkpoint"


def bundle_export_tip(exportable: bool) -> str:
    return EXPORT_TIP if exportable else "This bundle holds no model: make it with replica-studio bundle --with-model"
