"""Opens every window of the application on the X display it is given, one after the other, and
reports for each what a 1280x720 laptop would cut off (tests/ui/test_laptop_screen.py runs it
under Xvfb with a window manager; a process of its own, since the test process's Qt is offscreen):

    python tests/ui/laptop_driver.py WORK_DIR REPORT.json [--shots DIR]

The main window (on each tab, with a run open; then with a multi-worker config on the forms),
every dialog the menus open, the sweep window and the Compare window. For each: its frame and the
screen's available geometry, and a list of problems -- a visible button outside its window or
cut by its parent, a button narrower than its text, a one-line label narrower than its text, a
cut label or combo box without its whole text as tooltip, a table cell cut without a tooltip.
Runs, a sweep and settings are written under WORK_DIR; the engine is the UI tests' fake
(tests/ui/fake_engine.py: no TensorFlow). ``--shots`` saves the whole screen after each window
(``import -window root``, ImageMagick) to look at.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
os.environ.setdefault("PYQTGRAPH_QT_LIB", "PySide6")

from PySide6.QtCore import QRect, Qt, QTimer  # noqa: E402
from PySide6.QtGui import QCursor  # noqa: E402
from PySide6.QtWidgets import (  # noqa: E402
    QAbstractButton,
    QAbstractScrollArea,
    QAbstractSpinBox,
    QApplication,
    QComboBox,
    QLabel,
    QLineEdit,
    QPushButton,
    QStyle,
    QStyleOptionComboBox,
    QTableWidget,
    QTreeWidget,
    QWidget,
)

from gui_app.ui.screen_fit import frame_margins, plausible  # noqa: E402

SETTLE_S = 1.7  # after the window manager framed the window: well past ScreenFit's last check (600 ms)
LONG_MESSAGE = "loss became NaN at step 10 (learning rate 50 on /tmp/a/very/long/path/to/the/data): " + "why " * 40


def wait_until(predicate, timeout_s: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            return False
        QApplication.processEvents()
        time.sleep(0.02)
    return True


def framed(window: QWidget) -> bool:
    frame = frame_margins(window)
    return window.isVisible() and not frame.isNull() and plausible(frame)


def settle(window: QWidget) -> None:
    """Until the window manager framed the window and ScreenFit's checks after the show are done.
    Qt may have measured the frame too early (a 1x1 frame, kept until the next configure event:
    seen once in six runs on a loaded machine, and once more after one nudge); a resize there and
    back has it measured again, and failing that, the window unmapped and mapped again."""
    for attempt in range(5):  # a loaded machine may need the nudge more than once
        if wait_until(lambda: framed(window), 5):
            break
        if attempt < 2:
            size = window.size()
            window.resize(size.width() + 1, size.height())
            window.resize(size)
        else:  # still 1x1 after two nudges (seen at load 5 with two test runs beside it): map it again
            window.hide()
            window.show()
    end = time.monotonic() + SETTLE_S
    wait_until(lambda: time.monotonic() >= end, SETTLE_S + 5)


def rect_list(rect: QRect) -> list[int]:
    return [rect.x(), rect.y(), rect.width(), rect.height()]


def scrolled(widget: QWidget, top: QWidget) -> bool:
    """Whether ``widget`` sits in a scroll area under ``top`` (scrolling reaches what is cut)."""
    parent = widget.parentWidget()
    while parent is not None and parent is not top:
        if isinstance(parent, QAbstractScrollArea):
            return True
        parent = parent.parentWidget()
    return False


def shown_rect(widget: QWidget, top: QWidget) -> QRect:
    """The part of ``widget`` its parents up to ``top`` leave visible, in ``top``'s coordinates."""
    rect = QRect(widget.mapTo(top, widget.rect().topLeft()), widget.size())
    parent = widget.parentWidget()
    while parent is not None and parent is not top:
        rect = rect.intersected(QRect(parent.mapTo(top, parent.rect().topLeft()), parent.size()))
        parent = parent.parentWidget()
    return rect.intersected(top.rect())


def combo_text_width(box: QComboBox) -> int:
    option = QStyleOptionComboBox()
    box.initStyleOption(option)
    field = box.style().subControlRect(QStyle.ComplexControl.CC_ComboBox, option,
                                       QStyle.SubControl.SC_ComboBoxEditField, box)
    icon = box.iconSize().width() + 4 if not option.currentIcon.isNull() else 0
    return field.width() - icon - 2


def problems(top: QWidget) -> list[str]:
    from gui_app.ui.labels import ElidedLabel

    found: list[str] = []
    for button in top.findChildren(QAbstractButton):
        if not button.isVisible() or button.window() is not top or scrolled(button, top):
            continue
        name = button.text() or button.toolTip() or button.objectName() or type(button).__name__
        whole = QRect(button.mapTo(top, button.rect().topLeft()), button.size())
        if shown_rect(button, top) != whole:
            found.append(f"button {name!r} is cut off: {rect_list(whole)} in a window {rect_list(top.rect())}")
        elif isinstance(button, QPushButton) and button.text() and button.width() < button.sizeHint().width() - 1:
            found.append(f"button {name!r} is narrower than its text: {button.width()} < {button.sizeHint().width()}")
    for label in top.findChildren(QLabel):
        if not label.isVisible() or label.window() is not top or not label.text():
            continue
        if isinstance(label, ElidedLabel):
            if label.is_elided() and label.toolTip() != label.text():
                found.append(f"label {label.text()[:40]!r} is cut without its text as tooltip")
        elif not label.wordWrap() and label.width() < label.sizeHint().width() - 1:
            found.append(f"label {label.text()[:40]!r} is cut: {label.width()} < {label.sizeHint().width()} px")
    for box in top.findChildren(QComboBox):
        if not box.isVisible() or box.window() is not top or box.isEditable():
            continue
        text = box.currentText()
        if box.fontMetrics().horizontalAdvance(text) > combo_text_width(box) and text not in box.toolTip():
            found.append(f"combo box {text!r} is cut without its text as tooltip")
    for field in top.findChildren(QLineEdit) + top.findChildren(QAbstractSpinBox) + top.findChildren(QComboBox):
        inner = isinstance(field.parentWidget(), (QAbstractSpinBox, QComboBox))  # a spin box's own edit
        shown = field.isVisible() and field.window() is top and not inner
        if shown and field.height() < field.sizeHint().height() - 1:  # their height is fixed by the style
            found.append(f"field {type(field).__name__} is squeezed to {field.height()} px")
    for view in top.findChildren(QTableWidget) + top.findChildren(QTreeWidget):
        if view.isVisible() and view.window() is top:
            found += [f"cell {text!r} is cut without a tooltip" for text in cut_cells(view)]
    return found


def cut_cells(view) -> list[str]:
    """Cells whose text is wider than their column (less the margins the view draws the text in)
    and that have no tooltip: the view shows them cut with "…" and nothing tells the rest."""
    margin = 2 * (view.style().pixelMetric(QStyle.PixelMetric.PM_FocusFrameHMargin, None, view) + 1)
    metrics, cut = view.fontMetrics(), []
    if isinstance(view, QTableWidget):
        cells = [(view.item(r, c), c) for r in range(view.rowCount()) for c in range(view.columnCount())]
        texts = [(item.text(), item.toolTip(), column) for item, column in cells if item is not None]
    else:
        items = [view.topLevelItem(row) for row in range(view.topLevelItemCount())]
        texts = [(item.text(c), item.toolTip(c), c) for item in items for c in range(view.columnCount())]
    for text, tip, column in texts:
        if text and not tip and metrics.horizontalAdvance(text) > view.columnWidth(column) - margin:
            cut.append(text)
    return cut


class Report:
    def __init__(self, shots: Path | None) -> None:
        self.windows: list[dict] = []
        self.shots = shots

    def check(self, name: str, window: QWidget, extra: list[str] | None = None) -> None:
        settle(window)
        room = window.screen().availableGeometry()
        self.windows.append({"name": name, "title": window.windowTitle(), "frame": rect_list(window.frameGeometry()),
                             "room": rect_list(room), "problems": problems(window) + (extra or [])})
        if self.shots is not None:
            self.shots.mkdir(parents=True, exist_ok=True)
            subprocess.run(["import", "-window", "root", str(self.shots / f"{len(self.windows):02d}-{name}.png")],
                           check=True, timeout=60)


def main_window_checks(report: Report, window, run: Path) -> None:
    wait_until(lambda: not window.runs.is_filling())
    wait_until(lambda: window.config_panel.checked_config() is not None and not window.config_panel.inspector.is_busy())
    window.files.open_run(str(run))
    wait_until(lambda: not window.files.is_reading())  # a big run is read on a thread
    window.state.set_status("Run failed: " + LONG_MESSAGE)  # the longest status line there is
    for index in range(window.tabs.count()):
        window.tabs.setCurrentIndex(index)
        bar = window.statusBar()
        extra = [] if shown_rect(bar, window) == QRect(bar.mapTo(window, bar.rect().topLeft()), bar.size()) else \
            ["the status bar is cut off"]
        report.check(f"main-{window.tabs.tabText(index).lower()}", window, extra + stray_windows(window))


def stray_windows(window) -> list[str]:
    """Widgets shown as windows of their own beside the main window (none is open here; a tooltip
    or a popup menu is no window)."""
    windows = (Qt.WindowType.Window, Qt.WindowType.Dialog)
    return [f"a stray window: {type(w).__name__} {getattr(w, 'text', lambda: '')()!r}"
            for w in QApplication.topLevelWidgets() if w.isVisible() and w is not window and w.windowType() in windows]


def multi_worker_forms(window) -> None:
    from gui_app.core.config import RunConfig

    config = RunConfig.from_dict({"dataset": {"name": "digits"}, "model": {"name": "mnist_cnn"},
                                  "strategy": {"name": "multi_worker_mirrored", "workers": 2}})
    window.config_panel.set_config(config)
    wait_until(lambda: window.config_panel.checked_config() is not None)


def dialog_checks(report: Report, window, runs: Path, failed: Path, sweep: Path, completed: list[Path]) -> None:
    from gui_app.core.rundir import read_run
    from gui_app.ui.dialogs.getting_started import GettingStartedDialog
    from gui_app.ui.dialogs.resume import ResumeDialog
    from gui_app.ui.dialogs.submit_kubernetes import SubmitKubernetesDialog
    from gui_app.ui.sweep.new_sweep import NewSweepDialog
    from gui_app.ui.window.tool_actions import TOOLS

    def one(name: str, dialog: QWidget, prepare=None) -> None:
        dialog.show()
        if prepare is not None:
            prepare(dialog)
        report.check(name, dialog)
        dialog.close()

    for tool in TOOLS:
        one(f"tool-{tool.key}", window.tools.open(tool))
    one("export", window.models.export_model("tflite-int8-full", str(completed[0])))
    one("resume", ResumeDialog(read_run(failed), window))
    window.window_actions.getting_started.trigger()
    one("getting-started", window.findChild(GettingStartedDialog))
    window.window_actions.new_sweep.trigger()
    one("new-sweep", window.findChild(NewSweepDialog))

    # Save when hosts.json cannot be read (a folder in its place): a message of several lines,
    # naming the file, appears under the fields after the show; the fields keep their height.
    from gui_app.core.ssh_hosts import hosts_path

    def save_fails(dialog) -> None:
        hosts_path().mkdir(parents=True)
        dialog.name.setText("me@cluster-login-node")
        dialog.save_button.click()

    one("hosts", window.open_hosts(), save_fails)
    hosts_path().rmdir()
    multi_worker_forms(window)
    report.check("main-multi-worker", window, stray_windows(window))
    one("submit-slurm", window.slurm.open())
    config = window.config_panel.checked_config()
    one("submit-kubernetes", SubmitKubernetesDialog(config, str(runs), window, window._engine_command))

    def check_about() -> None:
        box = QApplication.activeModalWidget()
        if box is None:  # not shown yet (a loaded machine)
            QTimer.singleShot(100, check_about)
            return
        report.check("about", box)
        box.close()

    QTimer.singleShot(300, check_about)
    window.window_actions.about.trigger()  # modal: checked and closed by the timer
    view = window.sweeps.open_sweep(str(sweep))
    wait_until(lambda: view.status is not None and view.table.rowCount() > 0, 60)
    report.check("sweep", view, sweep_chart_problems(view))
    compare = window.files.compare_runs([str(p) for p in completed])
    wait_until(lambda: compare.comparison is not None, 60)
    report.check("compare", compare)
    compare.close()
    view.close()


def sweep_chart_problems(view) -> list[str]:
    """Trials and epochs tick on integers; the importance chart's note (fewer than two completed
    trials) lies inside its chart."""
    charts, found = view.charts, []
    for plot in (charts.best_plot, charts.curves_plot):
        axis = plot.getAxis("bottom")
        low, high = plot.viewRange()[0]
        ticks = [v for _, values in axis.tickValues(low, high, axis.width()) for v in values]
        if not ticks or any(v != round(v) for v in ticks):
            found.append(f"{plot.titleLabel.text!r} ticks {ticks}")
    charts.show_status(dataclasses.replace(view.status, importance={}), view.sweep.parameters)
    wait_until(lambda: bool(charts.note.toPlainText()), 10)
    QApplication.processEvents()
    note, box = charts.note.sceneBoundingRect(), charts.importance_plot.vb.sceneBoundingRect()
    if not box.contains(note):
        found.append(f"the importance note {charts.note.toPlainText()!r} is cut: {note} outside {box}")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("work", type=Path)
    parser.add_argument("report", type=Path)
    parser.add_argument("--shots", type=Path)
    args = parser.parse_args(argv)
    # A settings folder with a long path: the Hosts dialog's message names a file in it.
    os.environ["REPLICA_STUDIO_CONFIG_DIR"] = str(args.work / "a-settings-folder-as-long-as-some-home-folders-are"
                                                  / "config" / "replica-studio")
    os.environ["FAKE_ENGINE_MODE"] = "normal"
    from run_dirs import write_run
    from sweep_dirs import Trial, write_sweep

    from gui_app.ui import application
    from gui_app.ui.window.main_window import MainWindow

    runs = args.work / "runs"
    completed = [write_run(runs, f"run-{i}", "completed", accuracy=0.9 + i / 100) for i in range(2)]
    failed = write_run(runs, "run-failed", "failed", message=LONG_MESSAGE)
    sweep = write_sweep(args.work / "sweeps", [Trial(0.001, 64, "completed", (0.80, 0.90, 0.93)),
                                               Trial(0.0001, 32, "pruned", (0.30,)),
                                               Trial(0.01, 128, "completed", (0.85, 0.95, 0.97))])
    fake = [sys.executable, str(HERE / "fake_engine.py")]
    app = QApplication([sys.argv[0]])
    application.polish_application(app)
    # The pointer in a corner, off the windows: resting on a chart it would open its tooltip.
    room = app.primaryScreen().availableGeometry()
    QCursor.setPos(room.right(), room.bottom())
    report = Report(args.shots)
    window = MainWindow(runs_dir=runs, engine_command=lambda *a: [*fake, *a])
    window.show()
    window.start()
    try:
        main_window_checks(report, window, completed[0])
        dialog_checks(report, window, runs, failed, sweep, completed)
    finally:
        args.report.write_text(json.dumps(report.windows, indent=1))
        window.supervisor.close()
        window.settings.confirm_close_during_run = False
        window.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
