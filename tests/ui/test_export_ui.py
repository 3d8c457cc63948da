"""The export dialog and the Try panel, end to end on a real (MirroredStrategy) digits run,
through the real engine processes (``export --json``, ``predict --serve``)."""
from __future__ import annotations

import sys

from PySide6.QtCore import QMimeData, QPoint, QPointF, Qt, QUrl
from PySide6.QtGui import QDragEnterEvent, QDropEvent

import numpy as np
import pytest
from pngs import digit_like_pngs
from run_dirs import wait_listed

from gui_app.identity import app_command
from gui_app.ui.dialogs import export as export_dialog_module
from gui_app.ui.dialogs.export import ExportDialog
from gui_app.ui.tabs.prediction_rows import TOP_K, ErrorRow, PredictionRow, TopKBars
from gui_app.ui.tabs.try_model import TryTab
from gui_app.ui.window.main_window import MainWindow

TIMEOUT_MS = 120_000
TAB_TRY = 4  # View → Try (Ctrl+5)


@pytest.fixture(scope="module")
def ui_pngs(tmp_path_factory):
    return digit_like_pngs(tmp_path_factory.mktemp("ui-pngs"))


@pytest.fixture
def export_dialog(qtbot, trained_run, tmp_path):
    dialog = ExportDialog(trained_run, "tflite", folder=tmp_path)
    qtbot.addWidget(dialog)
    yield dialog
    if dialog.is_running():  # never leave an engine behind a failed test
        dialog.cancel()
        qtbot.waitSignal(dialog.job_ended, timeout=TIMEOUT_MS).wait()


def test_export_dialog_exports_checks_and_opens_the_folder(qtbot, export_dialog, trained_run, tmp_path,
                                                           monkeypatch):
    assert export_dialog.output_path() == tmp_path / f"{trained_run.name}.tflite"
    export_dialog._check.setValue(64)
    fractions = []
    export_dialog._progress.valueChanged.connect(fractions.append)
    with qtbot.waitSignal(export_dialog.succeeded, timeout=TIMEOUT_MS) as blocker:
        qtbot.mouseClick(export_dialog._run_button, Qt.MouseButton.LeftButton)
        assert export_dialog.is_running() and not export_dialog._format.isEnabled()
    result = blocker.args[0]
    assert result.passed and result.written and result.path.is_file()
    assert result.parity.examples == 64 and result.parity.max_abs_diff <= 1e-5
    assert (tmp_path / f"{result.path.name}.json").is_file()  # the model card
    report = export_dialog._report.text()
    assert "passed" in report and "Max abs diff" in report and str(result.card_path) in report
    assert len(set(fractions)) >= 4 and fractions[-1] == 1000  # the engine's progress lines moved the bar
    assert export_dialog._format.isEnabled()
    opened = []
    monkeypatch.setattr(export_dialog_module.QDesktopServices, "openUrl", lambda url: opened.append(url))
    assert export_dialog._open_button.isEnabled()
    qtbot.mouseClick(export_dialog._open_button, Qt.MouseButton.LeftButton)
    assert opened == [QUrl.fromLocalFile(str(tmp_path))]


def test_choosing_a_format_renames_the_output(export_dialog, trained_run, tmp_path):
    combo = export_dialog._format
    combo.setCurrentIndex(combo.findData("savedmodel"))
    assert export_dialog.output_path() == tmp_path / f"{trained_run.name}_savedmodel"
    combo.setCurrentIndex(combo.findData("tflite-int8-full"))
    assert export_dialog.output_path() == tmp_path / f"{trained_run.name}-int8-full.tflite"


def test_closing_the_dialog_while_it_exports_terminates_it_and_leaves_nothing(qtbot, export_dialog, tmp_path):
    export_dialog._format.setCurrentIndex(export_dialog._format.findData("tflite-int8-full"))
    export_dialog.show()
    with qtbot.waitSignal(export_dialog._progress.valueChanged, timeout=TIMEOUT_MS,
                          check_params_cb=lambda value: value >= 300):  # writing: temporaries exist
        export_dialog.start()
    assert any(tmp_path.iterdir())
    with qtbot.waitSignal(export_dialog.failed, timeout=TIMEOUT_MS) as blocker:
        export_dialog.reject()  # asks to cancel; closes once the process has ended
        assert export_dialog.isVisible()
    assert blocker.args == ["Cancelled: nothing was saved."]
    assert not export_dialog.isVisible() and not export_dialog.is_running()
    assert list(tmp_path.iterdir()) == []


def test_an_unwritable_destination_is_shown_as_one_line(qtbot, export_dialog, tmp_path):
    export_dialog._output.setText(str(tmp_path / "missing" / "m.tflite"))
    with qtbot.waitSignal(export_dialog.failed, timeout=TIMEOUT_MS) as blocker:
        export_dialog.start()
    assert blocker.args == [f"{tmp_path / 'missing'}: no such folder"]
    assert "no such folder" in export_dialog._status.text() and export_dialog._run_button.isEnabled()


# ---- Try panel ------------------------------------------------------------------------------

@pytest.fixture
def try_panel(qtbot):
    panel = TryTab()
    qtbot.addWidget(panel)
    yield panel
    panel.shutdown()


def _drop(panel: TryTab, paths) -> bool:
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(p)) for p in paths])
    enter = QDragEnterEvent(QPoint(5, 5), Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton,
                            Qt.KeyboardModifier.NoModifier)
    panel.dragEnterEvent(enter)
    panel.dropEvent(QDropEvent(QPointF(5, 5), Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton,
                               Qt.KeyboardModifier.NoModifier))
    return enter.isAccepted()


def test_try_panel_shows_top5_for_dropped_images_and_bad_ones_inline(qtbot, try_panel, trained_run, ui_pngs,
                                                                      tmp_path):
    paths, raw = ui_pngs
    broken = tmp_path / "broken.png"
    broken.write_bytes(b"not a png")
    try_panel.set_model_source(trained_run)
    assert try_panel.is_loading()
    loaded, failed = [], []
    try_panel.model_loaded.connect(loaded.append)
    try_panel.image_failed.connect(lambda source, message: failed.append((source, message)))
    with qtbot.waitSignal(try_panel.predictions_ready, timeout=TIMEOUT_MS):
        assert _drop(try_panel, [paths[0], broken, paths[1]])  # waits for the model to load
    assert len(loaded) == 1 and f"{trained_run.name}: run, " in loaded[0]
    assert try_panel._samples_button.isEnabled()  # the run's model card names its test set
    rows = try_panel.findChildren(PredictionRow)
    assert len(rows) == 2
    for row, image in zip(rows, raw):
        top = row.prediction.top(TOP_K)
        assert row.bars.height() == len(top) * TopKBars.ROW == 5 * TopKBars.ROW  # a bar each
        probabilities = [p for _, _, p in top]
        assert probabilities == sorted(probabilities, reverse=True) and sum(probabilities) <= 1.0 + 1e-6
        assert row.prediction.probabilities.sum() == pytest.approx(1.0, abs=1e-5)
        np.testing.assert_array_equal(row.prediction.image, image)  # shown as the model sees it
    [error] = try_panel.findChildren(ErrorRow)
    assert error.source == str(broken) and str(broken) in error.message and failed == [(error.source, error.message)]
    with qtbot.waitSignal(try_panel.predictions_ready, timeout=TIMEOUT_MS) as ready:
        try_panel.add_test_samples(4)
    predictions = ready.args[0]
    assert len(predictions) == 4 and len(try_panel.findChildren(PredictionRow)) == 6
    assert sum(p.top(1)[0][0] == p.label for p in predictions) >= 3  # the trained run is ~95 % right
    try_panel.clear()  # the rows are deleted once the event loop runs
    qtbot.waitUntil(lambda: not try_panel.findChildren(PredictionRow) and not try_panel.findChildren(ErrorRow))


def test_try_panel_reports_what_it_cannot_use(qtbot, try_panel, tmp_path):
    with qtbot.waitSignal(try_panel.failed, timeout=TIMEOUT_MS) as blocker:
        try_panel.add_image_files([tmp_path / "a.png"])
    assert blocker.args == ["Open a model first (a run folder or an exported file)."]
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(b"not an onnx graph")
    with qtbot.waitSignal(try_panel.failed, timeout=TIMEOUT_MS) as blocker:
        try_panel.set_model_source(broken)
    assert blocker.args[0].startswith(f"{broken}: not a valid ONNX model")
    assert try_panel.model_source() is None and not try_panel.is_loading()


# ---- the main window: Export menu and Try tab on a run opened from the run list -------------

@pytest.fixture
def history_window(qtbot, trained_run):
    window = MainWindow(runs_dir=trained_run.parent, engine_command=app_command)
    qtbot.addWidget(window)
    window.show()
    wait_listed(qtbot, window.runs)
    yield window
    window.close()


def test_export_menu_and_try_tab_on_a_run_from_history(qtbot, history_window, trained_run, ui_pngs, tmp_path):
    window = history_window
    keras_entry = window.window_actions.export["keras"]
    assert not keras_entry.isEnabled()
    window.runs.select(trained_run)
    window.runs.open_button.click()
    assert keras_entry.isEnabled() and window.try_tab.model_source() is None  # loaded when the tab shows
    keras_entry.trigger()
    dialog = window.models.export_dialog
    assert dialog.format_name() == "keras" and dialog.windowTitle() == f"Export {trained_run.name}"
    dialog._output.setText(str(tmp_path / "digits.keras"))
    dialog._check.setValue(32)
    with qtbot.waitSignal(dialog.succeeded, timeout=TIMEOUT_MS) as blocker:
        dialog.start()
    result = blocker.args[0]
    assert result.passed and result.path == tmp_path / "digits.keras" and result.path.is_file()
    assert str(result.card_path) in dialog._report.text()
    assert window.settings.last_export_dir == str(tmp_path)  # the next export starts there
    dialog.close()

    with qtbot.waitSignal(window.try_tab.model_loaded, timeout=TIMEOUT_MS):
        window.window_actions.tabs[TAB_TRY].trigger()
    assert window.try_tab.model_source() == trained_run
    paths, _ = ui_pngs
    window.tabs.setCurrentWidget(window.evaluation_tab)
    mime = QMimeData()  # kept here: the event does not own it
    mime.setUrls([QUrl.fromLocalFile(str(p)) for p in paths])
    with qtbot.waitSignal(window.try_tab.predictions_ready, timeout=TIMEOUT_MS):
        # Images dropped anywhere on the window go to the Try tab.
        window.dropEvent(QDropEvent(QPointF(5, 5), Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton,
                                    Qt.KeyboardModifier.NoModifier))
    assert window.tabs.currentWidget() is window.try_tab and len(window.try_tab.findChildren(PredictionRow)) == 2


STUBBORN_EXPORT = r"""
import json, signal, sys, time
from pathlib import Path
signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a converter call that does not return in time
output = Path(sys.argv[sys.argv.index("--output") + 1])
(output.parent / f".{output.name}.1234abcd.partial{output.suffix}").write_bytes(b"half")
(output.parent / f".{output.name}.json.5678.partial.json").write_bytes(b"{")
print(json.dumps({"type": "progress", "fraction": 0.3, "message": "Writing"}), flush=True)
time.sleep(60)
"""


def test_an_export_that_ignores_cancel_is_killed_and_its_temporaries_removed(qtbot, trained_run, tmp_path,
                                                                             monkeypatch):
    monkeypatch.setattr(ExportDialog, "cancel_grace_s", 0.5)
    dialog = ExportDialog(trained_run, "tflite", folder=tmp_path,
                          engine_command=lambda *args: [sys.executable, "-c", STUBBORN_EXPORT, *args])
    qtbot.addWidget(dialog)
    with qtbot.waitSignal(dialog._progress.valueChanged, timeout=30_000, check_params_cb=lambda v: v >= 300):
        dialog.start()
    assert len(list(tmp_path.iterdir())) == 2
    with qtbot.waitSignal(dialog.failed, timeout=30_000) as blocker:
        dialog.cancel()
    assert blocker.args == ["Cancelled: nothing was saved."]
    assert list(tmp_path.iterdir()) == [] and not dialog.is_running()
