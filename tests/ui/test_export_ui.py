"""The export dialog and the Try panel, end to end on a real (MirroredStrategy) digits run."""
from __future__ import annotations


import numpy as np
import pytest
from PySide6.QtCore import QMimeData, QPoint, QPointF, Qt, QUrl
from PySide6.QtGui import QDragEnterEvent, QDropEvent

from gui_app.core.export import export_run, read_card
from gui_app.ui.dialogs import export as export_dialog_module
from gui_app.ui.dialogs.export import ExportDialog
from gui_app.ui.window.main_window import MainWindow
from gui_app.ui.tabs.try_model import TryPanel

from reference_run import write_test_pngs

TIMEOUT_MS = 120_000
TAB_TRY = 4  # View → Try (Ctrl+5)


@pytest.fixture(scope="module")
def ui_digit_pngs(trained_run, tmp_path_factory):
    paths, images, _ = write_test_pngs(trained_run, tmp_path_factory.mktemp("ui-pngs"))
    return paths, images


@pytest.fixture
def export_dialog(qtbot, trained_run, tmp_path):
    dialog = ExportDialog(trained_run, "tflite", folder=tmp_path)
    qtbot.addWidget(dialog)
    yield dialog
    if dialog.is_running():  # never leave a worker behind a failed test
        dialog.cancel()
        qtbot.waitSignal(dialog.done, timeout=TIMEOUT_MS).wait()


def test_export_dialog_exports_checks_and_opens_the_folder(qtbot, export_dialog, trained_run, tmp_path,
                                                           monkeypatch):
    assert export_dialog.output_path() == tmp_path / f"{trained_run.name}.tflite"
    export_dialog.set_check(64)
    with qtbot.waitSignal(export_dialog.succeeded, timeout=TIMEOUT_MS) as blocker:
        qtbot.mouseClick(export_dialog._export_button, Qt.MouseButton.LeftButton)
        assert export_dialog.is_running() and not export_dialog._format.isEnabled()
    result = blocker.args[0]
    assert result.passed and result.written and result.path.is_file()
    assert result.parity.examples == 64 and result.parity.max_abs_diff <= 1e-5
    assert read_card(result.path)["format"] == "tflite"
    report = export_dialog._report.text()
    assert "passed" in report and "Max abs diff" in report and str(result.card_path) in report
    assert export_dialog._progress.value() == 1000 and export_dialog._format.isEnabled()
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


def test_closing_the_dialog_while_it_exports_cancels_and_leaves_nothing(qtbot, export_dialog, tmp_path):
    export_dialog._format.setCurrentIndex(export_dialog._format.findData("tflite-int8-full"))
    export_dialog.show()
    with qtbot.waitSignal(export_dialog.failed, timeout=TIMEOUT_MS) as blocker:
        export_dialog.start()
        export_dialog.reject()  # asks to cancel; closes once the worker has stopped
        assert export_dialog.isVisible()
    assert blocker.args == ["Cancelled: nothing was saved."]
    assert not export_dialog.isVisible() and not export_dialog.is_running()
    assert list(tmp_path.iterdir()) == []


def test_an_unwritable_destination_is_shown_as_one_line(qtbot, export_dialog, tmp_path):
    export_dialog.set_output_path(tmp_path / "missing" / "m.tflite")
    with qtbot.waitSignal(export_dialog.failed, timeout=TIMEOUT_MS) as blocker:
        export_dialog.start()
    assert blocker.args == [f"{tmp_path / 'missing'}: no such folder"]
    assert "no such folder" in export_dialog._status.text() and export_dialog._export_button.isEnabled()


# ---- Try panel ------------------------------------------------------------------------------

@pytest.fixture
def try_panel(qtbot):
    panel = TryPanel()
    qtbot.addWidget(panel)
    yield panel
    panel.shutdown()


def _drop(panel: TryPanel, paths) -> bool:
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(p)) for p in paths])
    enter = QDragEnterEvent(QPoint(5, 5), Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton,
                            Qt.KeyboardModifier.NoModifier)
    panel.dragEnterEvent(enter)
    panel.dropEvent(QDropEvent(QPointF(5, 5), Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton,
                               Qt.KeyboardModifier.NoModifier))
    return enter.isAccepted()


def test_try_panel_shows_top5_for_dropped_images(qtbot, try_panel, trained_run, ui_digit_pngs):
    paths, raw = ui_digit_pngs
    with qtbot.waitSignal(try_panel.model_loaded, timeout=TIMEOUT_MS) as loaded:
        try_panel.set_model_source(trained_run)
    assert loaded.args[0].endswith("run, 8×8 grey, 10 classes")
    with qtbot.waitSignal(try_panel.predictions_ready, timeout=TIMEOUT_MS):
        assert _drop(try_panel, paths)
    rows = try_panel.rows()
    assert len(rows) == 2
    for row, image in zip(rows, raw):
        entries = row.bars.entries()
        assert len(entries) == 5
        probabilities = [p for _, p in entries]
        assert probabilities == sorted(probabilities, reverse=True) and sum(probabilities) <= 1.0 + 1e-6
        assert row.prediction.probabilities.sum() == pytest.approx(1.0, abs=1e-5)
        np.testing.assert_array_equal(row.prediction.image, image)  # shown as the model sees it
    try_panel.clear()
    assert try_panel.rows() == []


@pytest.fixture(scope="module")
def ui_int8_export(trained_run, tmp_path_factory):
    folder = tmp_path_factory.mktemp("ui-export")
    return export_run(trained_run, "tflite-int8", folder / "digits-int8.tflite", check=32).path


def test_try_panel_classifies_test_samples_with_an_exported_file(qtbot, try_panel, ui_int8_export):
    with qtbot.waitSignal(try_panel.model_loaded, timeout=TIMEOUT_MS) as loaded:
        try_panel.set_model_source(ui_int8_export)
    assert "TensorFlow Lite" in loaded.args[0]
    with qtbot.waitSignal(try_panel.predictions_ready, timeout=TIMEOUT_MS) as ready:
        try_panel.add_test_samples(4)
    predictions = ready.args[0]
    assert len(predictions) == 4 and len(try_panel.rows()) == 4
    assert all(p.label is not None for p in predictions)
    assert sum(p.top(1)[0][0] == p.label for p in predictions) >= 3


def test_try_panel_reports_what_it_cannot_use(qtbot, try_panel, tmp_path):
    with qtbot.waitSignal(try_panel.failed, timeout=TIMEOUT_MS) as blocker:
        try_panel.add_image_files([tmp_path / "a.png"])
    assert blocker.args == ["Open a model first (a run folder or an exported file)."]
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(b"not an onnx graph")
    with qtbot.waitSignal(try_panel.failed, timeout=TIMEOUT_MS) as blocker:
        try_panel.set_model_source(broken)
    assert blocker.args[0].startswith(f"{broken}: not a valid ONNX model")


# ---- the main window: Export menu and Try tab on a run opened from the run list -------------

@pytest.fixture
def history_window(qtbot, trained_run, fake_engine):
    window = MainWindow(runs_dir=trained_run.parent, engine_command=fake_engine)
    qtbot.addWidget(window)
    window.show()
    yield window
    window.close()


def test_export_menu_and_try_tab_on_a_run_from_history(qtbot, history_window, trained_run, ui_digit_pngs,
                                                        tmp_path):
    window = history_window
    keras_entry = window.actions.export["keras"]
    assert not keras_entry.isEnabled()
    window.runs.select(trained_run)
    window.runs.open_button.click()
    assert keras_entry.isEnabled() and window.try_panel.model_source() is None  # loaded when the tab shows
    keras_entry.trigger()
    dialog = window.export_dialog
    assert dialog.format_name() == "keras" and dialog.windowTitle() == f"Export {trained_run.name}"
    dialog.set_output_path(tmp_path / "digits.keras")
    dialog.set_check(32)
    with qtbot.waitSignal(dialog.succeeded, timeout=TIMEOUT_MS) as blocker:
        dialog.start()
    result = blocker.args[0]
    assert result.passed and result.path == tmp_path / "digits.keras" and result.path.is_file()
    assert str(result.card_path) in dialog._report.text()
    assert window.settings.last_export_dir == str(tmp_path)  # the next export starts there
    dialog.close()

    with qtbot.waitSignal(window.try_panel.model_loaded, timeout=TIMEOUT_MS):
        window.actions.tabs[TAB_TRY].trigger()
    assert window.try_panel.model_source() == trained_run
    paths, _ = ui_digit_pngs
    window.tabs.setCurrentWidget(window.evaluation)
    mime = QMimeData()  # kept here: the event does not own it
    mime.setUrls([QUrl.fromLocalFile(str(p)) for p in paths])
    with qtbot.waitSignal(window.try_panel.predictions_ready, timeout=TIMEOUT_MS):
        # Images dropped anywhere on the window go to the Try tab.
        window.dropEvent(QDropEvent(QPointF(5, 5), Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton,
                                    Qt.KeyboardModifier.NoModifier))
    assert window.tabs.currentWidget() is window.try_panel and len(window.try_panel.rows()) == 2
