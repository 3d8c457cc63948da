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
    with qtbot.waitSignal(dialog.report_ready, timeout=10_000) as got:
        dialog.start()
    qtbot.waitUntil(lambda: not dialog.is_running(), timeout=10_000)
    assert got.args[0]["rows"][1]["speedup"] == 1.5
    table = dialog._table
    assert table.rowCount() == 3
    assert [table.item(1, c).text() for c in range(4)] == ["mirrored, 2 replicas", "1,500", "1.50×", "75%"]
    assert table.item(2, 1).text() == "failed: the ps process did not start"
    assert len(dialog._plot.listDataItems()) == 3  # the ideal line and one curve per strategy
    assert dialog._recommendation.text() == "Fastest here: the fake."
    assert (tmp_path / "report" / "scaling.json").is_file()


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
