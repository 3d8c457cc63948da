"""Tools -> Scaling benchmark: the dialog runs ``scaling --json`` through the process runner and
shows its report; reports saved earlier open again; Cancel ends the measuring process."""
from __future__ import annotations

import json

import pytest

from gui_app.core.config import RunConfig
from gui_app.ui.dialogs.scaling import ScalingDialog


@pytest.fixture
def dialog(qtbot, fake_engine, tmp_path):
    d = ScalingDialog(RunConfig(), folder=tmp_path / "report", engine_command=fake_engine)
    qtbot.addWidget(d)
    return d


def test_a_run_fills_the_table_the_chart_and_the_recommendation(dialog, qtbot, tmp_path):
    with qtbot.waitSignal(dialog.succeeded, timeout=10_000) as got:
        dialog.start()
    qtbot.waitUntil(lambda: not dialog.is_running(), timeout=10_000)
    assert got.args[0].rows[1].speedup == 1.5
    table = dialog._table
    assert table.rowCount() == 3
    assert [table.item(1, c).text() for c in range(4)] == ["mirrored, 2 replicas", "1,500", "1.50×", "75%"]
    assert table.item(2, 1).text() == "failed: the ps process did not start"
    assert len(dialog._plot.listDataItems()) == 3  # the ideal line and one curve per strategy
    assert dialog._recommendation.text() == "Fastest here: the fake."
    assert (tmp_path / "report" / "scaling.json").is_file()
    from PySide6.QtGui import QImage

    png = QImage(str(tmp_path / "report" / "scaling.png"))  # drawn from the SVG, at twice its size
    assert png.width() == 1280 and png.height() >= 800 and "scaling.png" in dialog._status.text()


def test_a_saved_report_opens_again_and_a_bad_file_says_why(dialog, tmp_path):
    good = tmp_path / "scaling.json"
    good.write_text(json.dumps({"rows": [{"label": "one_device", "strategy": {"name": "one_device"}, "replicas": 1,
                                          "examples_per_sec": 900.0, "speedup": 1.0, "efficiency": 1.0,
                                          "time_split": None, "error": None}], "recommendation": "ok"}))
    assert dialog.open_report(good) and dialog._table.rowCount() == 1
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    assert not dialog.open_report(bad)
    assert "not a scaling report" in dialog._status.text()


def test_cancel_ends_the_measuring_process(dialog, qtbot, fake_engine):
    fake_engine.configure("wait")
    dialog.start()
    qtbot.waitUntil(lambda: "training" in dialog._status.text(), timeout=10_000)
    with qtbot.waitSignal(dialog.failed, timeout=10_000) as failed:
        dialog.reject()
    assert failed.args == ["Cancelled."] and not dialog.is_running()


def test_nothing_ticked_is_said_not_run(dialog):
    for box in dialog._strategies.values():
        box.setChecked(False)
    dialog.start()
    assert not dialog.is_running() and dialog._status.text() == "Tick at least one strategy."


def test_communication_options_are_asked_and_shown_with_their_loss_effect(dialog, qtbot):
    assert dialog._options_table.isHidden()
    dialog._options.setChecked(True)
    with qtbot.waitSignal(dialog.succeeded, timeout=10_000) as got:
        dialog.start()
    qtbot.waitUntil(lambda: not dialog.is_running(), timeout=10_000)
    assert len(got.args[0].options) == 4  # the fake answers --options only when it is passed
    table = dialog._options_table
    assert not table.isHidden() and table.rowCount() == 4
    assert [table.item(1, c).text() for c in range(5)] == [
        "mirrored, 2 replicas: all-reduce in float16", "1,350", "0.90×", "1.2504", "+0.00040"]
    assert table.item(3, 4).text() == "not comparable"  # the batch/4 reference trains on fewer examples


def test_a_version_1_report_without_options_still_opens(dialog, tmp_path):
    old = tmp_path / "v1.json"
    old.write_text(json.dumps({"version": 1, "rows": [{"label": "mirrored, 2 replicas",
                                                      "strategy": {"name": "mirrored"},
                                                      "replicas": 2, "examples_per_sec": 900.0, "speedup": 0.6,
                                                      "efficiency": 0.3, "time_split": None, "error": None}],
                               "recommendation": "old"}))
    assert dialog.open_report(old) and dialog._table.rowCount() == 1 and dialog._options_table.isHidden()


def test_the_fake_report_has_the_real_report_s_keys(fake_engine, tmp_path):
    """The fake engine's scaling report keeps matching gui_app.core.scaling_options.report."""
    import subprocess

    from gui_app.core import scaling, scaling_options

    config = {"training": {"global_batch_size": 64}}
    plan = scaling.candidates(config, 1, ("one_device",)) + scaling_options.option_candidates(config, 2, ("mirrored",))
    real = scaling_options.report([scaling.Burst(c, 100.0, 10, loss=1.0) for c in plan], on_gpus=False)
    done = subprocess.run(fake_engine("scaling", "c.json", "--strategies", "mirrored", "--options", "--output",
                                      str(tmp_path), "--json"), capture_output=True, text=True, timeout=60, check=True)
    fake = json.loads(done.stdout.splitlines()[-1])
    assert set(fake) - {"type", "path"} == set(real) and fake["version"] == real["version"]
    assert {k for r in fake["rows"] for k in r} == set(real["rows"][0])
    assert {k for r in fake["options"] for k in r} == set(real["options"][0])


def test_the_chart_follows_the_palette(dialog):
    from PySide6.QtGui import QColor, QPalette

    palette = dialog.palette()
    palette.setColor(QPalette.ColorRole.Base, QColor("#202124"))
    dialog.setPalette(palette)
    assert dialog._graphics.backgroundBrush().color().name() == "#202124"


def test_the_dialog_times_what_the_command_line_times_and_fits_a_laptop(dialog, qtbot, fake_engine):
    import argparse

    from gui_app.core import scaling
    from gui_app.engine.commands import scaling as scaling_command

    parser = argparse.ArgumentParser()
    scaling_command.add_commands(parser.add_subparsers())
    cli_default = parser.parse_args(["scaling", "config.json"]).strategies.split(",")
    ticked = [name for name, box in dialog._strategies.items() if box.isChecked()]
    assert ticked == cli_default == list(scaling.DEFAULT_STRATEGIES)  # the same rows, the same baseline
    for table in (dialog._table, dialog._options_table):
        header = table.horizontalHeader()
        for column in range(table.columnCount()):  # no header cut ("All-reduce + rest")
            text = table.horizontalHeaderItem(column).text()
            assert header.sectionSize(column) > header.fontMetrics().horizontalAdvance(text), text

    open_report = next(b for b in dialog._buttons.buttons() if b.text() == "Open report…")
    fake_engine.configure("wait")
    dialog.start()
    qtbot.waitUntil(lambda: "training" in dialog._status.text(), timeout=10_000)
    assert not open_report.isEnabled()  # a report opened now would be replaced by the one measured
    with qtbot.waitSignal(dialog.failed, timeout=10_000):
        dialog.cancel()
    qtbot.waitUntil(lambda: not dialog.is_running(), timeout=10_000)
    assert open_report.isEnabled()


def test_the_chart_names_its_baseline_and_counts_whole_replicas(dialog, qtbot):
    for name in ("multi_worker_mirrored", "parameter_server"):
        dialog._strategies[name].setChecked(True)
    with qtbot.waitSignal(dialog.succeeded, timeout=10_000):
        dialog.start()
    qtbot.waitUntil(lambda: not dialog.is_running(), timeout=10_000)
    assert dialog._plot.titleLabel.text == "Speed-up against one_device, 1 replicas"
    assert dialog._plot.getAxis("bottom")._tickLevels == [[(1, "1"), (2, "2"), (3, "3"), (4, "4")]]
    assert dialog.minimumSizeHint().height() <= 720  # the report scrolls inside a laptop-high dialog
