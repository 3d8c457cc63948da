"""The comparison view: real run directories side by side, sorted, exported, grouped by seed and drawn."""
from __future__ import annotations

import subprocess
import time

import shiboken6
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

import numpy as np
import pyqtgraph as pg
import pytest
from compared_runs import write_run
from run_dirs import wait_listed

from gui_app.identity import app_command, app_env
from gui_app.ui.dialogs.compare import CompareDialog
from gui_app.ui.window.main_window import MainWindow


def shown(qtbot, run_dirs) -> CompareDialog:
    """The dialog over ``run_dirs`` once its reader thread has read them, its chart drawn."""
    dialog = CompareDialog([str(p) for p in run_dirs])
    qtbot.addWidget(dialog)
    with qtbot.waitSignal(dialog.loaded, timeout=30_000):
        dialog.show()
    dialog.chart.flush()
    return dialog


def table(dialog: CompareDialog) -> tuple[list[str], list[list[str]]]:
    """Header and cells as the table shows them now (sorted as its header says)."""
    model = dialog.table.model()
    header = [model.headerData(c, Qt.Orientation.Horizontal) for c in range(model.columnCount())]
    return header, [[model.index(r, c).data() for c in range(model.columnCount())] for r in range(model.rowCount())]


def column(dialog: CompareDialog, title: str) -> list[str]:
    header, cells = table(dialog)
    return [row[header.index(title)] for row in cells]


def test_three_runs_differing_in_learning_rate(qtbot, tmp_path):
    runs = [write_run(tmp_path / "a", 0.01, 1, 0.9, 0.91, steps=10),
            write_run(tmp_path / "b", 5e-5, 1, 0.8, 0.82, steps=20),
            write_run(tmp_path / "c", 0.001, 1, 0.7, 0.72, steps=5)]
    dialog = shown(qtbot, runs)
    header, cells = table(dialog)
    assert header == ["Run", "Started", "Status", "Learning rate", "Test accuracy", "Val accuracy", "Val loss", "Steps",
                      "Time (s)"]
    assert dialog.table.model().headerData(3, Qt.Orientation.Horizontal, Qt.ItemDataRole.ToolTipRole) \
        == "training.learning_rate"
    started = time.strftime("%Y-%m-%d %H:%M", time.localtime(1000.0))  # compared_runs starts each run at t=1000
    assert cells == [["a", started, "completed", "0.01", "0.9100", "0.9000", "0.1000", "10", "12"],
                     ["b", started, "completed", "5e-05", "0.8200", "0.8000", "0.2000", "20", "22"],
                     ["c", started, "completed", "0.001", "0.7200", "0.7000", "0.3000", "5", "7"]]

    # Numbers sort by value, not as text ("5e-05" < "0.001" < "0.01"; 5 < 10 < 20).
    dialog.table.sortByColumn(header.index("Learning rate"), Qt.SortOrder.AscendingOrder)
    assert column(dialog, "Run") == ["b", "c", "a"]
    dialog.table.sortByColumn(header.index("Steps"), Qt.SortOrder.DescendingOrder)
    assert column(dialog, "Steps") == ["20", "10", "5"]

    # The overlay: one curve a run, each its own colour, no band.
    assert len(dialog.chart.curves) == 3 and all(c.band is None for c in dialog.chart.curves)
    x, y = dialog.chart.curves[1].line.getData()
    assert list(x) == list(range(1, 21)) and y[0] == pytest.approx(5e-5 * 100 + 1)
    assert len({c.line.opts["pen"].color().name() for c in dialog.chart.curves}) == 3
    legend = [label.text for _, label in dialog.chart.plot.legend.items]
    assert legend == ["a", "b", "c"]
    dialog.chart.set_curve("val_accuracy")
    dialog.chart.flush()
    assert list(dialog.chart.curves[2].line.getData()[0]) == [1]  # 5 steps: one epoch

    # Selecting a row (here the first shown: b, sorted by steps) highlights its curve only.
    dialog.table.selectRow(0)
    widths = [c.line.opts["pen"].width() for c in dialog.chart.curves]
    assert widths == [1, 3, 1] and dialog.open_button.isEnabled()
    with qtbot.waitSignal(dialog.open_requested) as opened:
        dialog.open_button.click()
    assert opened.args == [str(runs[1])]

    # The CSV is the command line's.
    cli_csv, ours = tmp_path / "cli.csv", tmp_path / "window.csv"
    subprocess.run(app_command("compare", *map(str, runs), "--csv", str(cli_csv)), env=app_env(), check=True,
                   capture_output=True, timeout=120)
    dialog.export_csv(ours)
    assert ours.read_text() == cli_csv.read_text()


def test_a_pair_of_seeds_is_one_row_with_a_band(qtbot, tmp_path):
    runs = [write_run(tmp_path / "s1", 0.01, 1, 0.8, 0.80), write_run(tmp_path / "s2", 0.01, 2, 0.9, 0.90),
            write_run(tmp_path / "other", 0.001, 1, 0.5, 0.50)]
    dialog = shown(qtbot, runs)
    header, cells = table(dialog)
    assert header[3:5] == ["Learning rate", "Seeds"]
    assert [row[0] for row in cells] == ["s1, s2", "other"]
    pair = dict(zip(header, cells[0]))
    assert pair["Seeds"] == "1, 2" and pair["Test accuracy"] == "0.8500 ± 0.0707"
    assert pair["Val accuracy"] == f"0.8500 ± {np.std([0.8, 0.9], ddof=1):.4f}"
    assert dialog.status.text() == "3 runs: 1 setting differs, 1 seed group"
    band_curve, single = dialog.chart.curves
    assert [label.text for _, label in dialog.chart.plot.legend.items] == ["s1 + 1 more (seeds 1, 2)", "other"]
    assert single.band is None and isinstance(band_curve.band, pg.FillBetweenItem)
    assert band_curve.band in dialog.chart.plot.items
    low, high = band_curve.band.curves
    # The loss is lr * 100 / step + seed: the seed-1 run is the minimum at every step, seed 2 the maximum.
    steps = np.arange(1, 11)
    assert list(low.getData()[0]) == list(steps)
    assert low.getData()[1] == pytest.approx(1.0 / steps + 1) and high.getData()[1] == pytest.approx(1.0 / steps + 2)
    assert band_curve.line.getData()[1] == pytest.approx(1.0 / steps + 1.5)  # the mean line

    first = dialog.model.item(0, 0)
    dialog.group_box.setChecked(False)  # one row a run, the seed an ordinary column
    dialog.chart.flush()
    # The first rows' items are gone, and PySide knows it: a wrapper left live for a deleted item
    # made a QObject later built at its address come back as a QStandardItem (a window's plot failed).
    assert not shiboken6.isValid(first)
    header, cells = table(dialog)
    assert header[3:5] == ["Learning rate", "Seed"] and len(cells) == 3
    assert all(c.band is None for c in dialog.chart.curves) and len(dialog.chart.curves) == 3


def test_the_run_list_opens_it_and_the_keyboard_drives_it(qtbot, runs_dir):
    runs = [write_run(runs_dir / name, lr, 1, 0.8, 0.8) for name, lr in (("a", 0.01), ("b", 0.001))]
    window = MainWindow(runs_dir=runs_dir)
    qtbot.addWidget(window)
    wait_listed(qtbot, window.runs)
    window.runs.select(runs[0])
    assert not window.runs.compare_button.isEnabled() and not window.window_actions.compare_runs.isEnabled()
    window.runs.select(*runs)
    assert window.runs.compare_button.isEnabled() and window.window_actions.compare_runs.isEnabled()
    window.runs.compare_button.click()
    dialog = window.findChild(CompareDialog)
    assert dialog is not None and dialog.isVisible() and not dialog.isModal()
    qtbot.waitUntil(lambda: dialog.comparison is not None, timeout=30_000)

    # Tab goes through the controls in order; Esc closes.
    dialog.table.selectRow(1)  # Open run is enabled (Tab skips a disabled button)
    dialog.activateWindow()
    dialog.group_box.setFocus()
    seen = [QApplication.focusWidget()]
    for _ in range(5):
        qtbot.keyClick(QApplication.focusWidget(), Qt.Key.Key_Tab)
        seen.append(QApplication.focusWidget())
    assert seen == [dialog.group_box, dialog.table, dialog.chart.curve_box, dialog.open_button, dialog.csv_button,
                    dialog.close_button]
    dialog.table.setFocus()
    qtbot.keyClick(dialog.table, Qt.Key.Key_Escape)
    assert not dialog.isVisible()
