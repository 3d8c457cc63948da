"""The window never runs TensorFlow: export and try a model from the MainWindow with the real
engine, then check that this (the window's) process imported none of TensorFlow's stack.

tests/conftest.py runs the UI tests before tests/core and tests/engine (which use TensorFlow
in-process), so nothing else has put TensorFlow into ``sys.modules`` yet.
"""
from __future__ import annotations

import sys

import pytest
from pngs import digit_like_pngs

from gui_app.identity import app_command
from gui_app.ui.tabs.prediction_rows import TOP_K, PredictionRow, TopKBars
from gui_app.ui.window.main_window import MainWindow

TIMEOUT_MS = 120_000
TAB_TRY = 4  # View → Try (Ctrl+5)
HEAVY = ("tensorflow", "keras", "tf2onnx", "onnx", "onnxruntime", "ai_edge_litert")


@pytest.fixture
def real_window(qtbot, trained_run):
    window = MainWindow(runs_dir=trained_run.parent, engine_command=app_command)
    qtbot.addWidget(window)
    window.show()
    window.start()  # device detection: an engine process too
    yield window
    window.close()


def _export_from_the_menu(qtbot, window, fmt: str, folder):
    window.window_actions.export[fmt].trigger()
    dialog = window.models.export_dialog
    assert dialog.format_name() == fmt and dialog.isVisible()
    dialog._output.setText(str(folder / f"digits.{fmt}"))
    dialog._check.setValue(64)
    with qtbot.waitSignal(dialog.succeeded, timeout=TIMEOUT_MS) as blocker:
        dialog._run_button.click()
    result = blocker.args[0]
    assert "passed" in dialog._report.text()
    dialog.close()
    return result


def test_export_and_try_from_the_window_never_import_tensorflow(qtbot, real_window, trained_run, tmp_path):
    window = real_window
    assert window.files.open_run(str(trained_run))
    qtbot.waitUntil(lambda: not window.files.is_reading(), timeout=TIMEOUT_MS)  # a big run is read on a thread
    assert window.state.model_run() == str(trained_run)

    for fmt, runtime in (("tflite", "ai_edge_litert"), ("onnx", "onnxruntime")):
        result = _export_from_the_menu(qtbot, window, fmt, tmp_path)
        assert result.passed and result.written and result.path.is_file() and result.card_path.is_file()
        assert result.parity.runtime == runtime and result.parity.examples == 64
        assert result.parity.max_abs_diff <= 1e-5

    panel = window.try_tab
    paths, images = digit_like_pngs(tmp_path)
    with qtbot.waitSignal(panel.model_loaded, timeout=TIMEOUT_MS):
        window.window_actions.tabs[TAB_TRY].trigger()  # the tab starts the run's predict --serve process
    with qtbot.waitSignal(panel.predictions_ready, timeout=TIMEOUT_MS) as ready:
        window.models.try_images([str(paths[0])])
    [prediction] = ready.args[0]
    assert (prediction.image == images[0]).all() and len(prediction.top(TOP_K)) == 5
    with qtbot.waitSignal(panel.predictions_ready, timeout=TIMEOUT_MS) as ready:
        panel._samples_button.click()
    assert len(ready.args[0]) == 8 and all(p.label is not None for p in ready.args[0])
    rows = panel.findChildren(PredictionRow)
    assert len(rows) == 9 and all(row.bars.height() == 5 * TopKBars.ROW for row in rows)  # five bars each
    qtbot.waitUntil(lambda: window.config_panel.devices.info is not None, timeout=TIMEOUT_MS)

    loaded = sorted(name for name in sys.modules if name.split(".")[0] in HEAVY)
    assert loaded == [], f"the window's process imported {loaded[:5]}"
