"""File -> Save report…: the run on screen written as one HTML file by the real ``report``
command, run as an engine process; the file dialog is patched (no native dialog offscreen)."""
from __future__ import annotations

from pathlib import Path

import pytest
from report_runs import TEST_ACCURACY, write_run
from windows import real_engine, shown_window

from gui_app.ui.window import report_actions


@pytest.fixture
def report_window(qtbot, fake_engine):
    with shown_window(qtbot, engine_command=real_engine(fake_engine)) as window:
        yield window


def _choose(monkeypatch, path: Path) -> None:
    monkeypatch.setattr(report_actions.QFileDialog, "getSaveFileName", lambda *args, **kwargs: (str(path), ""))


def test_save_report_writes_the_run_on_screen(qtbot, report_window, runs_dir, tmp_path, monkeypatch):
    window = report_window
    action = window.window_actions.save_report
    assert not action.isEnabled()  # no run on screen, none selected
    run = write_run(runs_dir / "run-a")
    assert window.files.open_run(str(run))
    assert action.isEnabled()
    _choose(monkeypatch, tmp_path / "shared" / "run-a")  # no suffix typed: .html is added
    (tmp_path / "shared").mkdir()
    with qtbot.waitSignal(window.reports.saved, timeout=60_000) as saved:
        action.trigger()
    out = tmp_path / "shared" / "run-a.html"
    assert saved.args == [str(out)]
    text = out.read_text(encoding="utf-8")
    assert f"{TEST_ACCURACY:.2%}" in text and "replica 1 · CPU:1" in text
    assert window.state.status.startswith(f"Report saved to {out} (")
    assert window.settings.last_export_dir == str(out.parent)  # the next dialog opens there


def test_a_report_that_cannot_be_written_is_said(qtbot, report_window, runs_dir, tmp_path, monkeypatch):
    window = report_window
    run = write_run(runs_dir / "run-b")
    assert window.files.open_run(str(run))
    _choose(monkeypatch, tmp_path / "no" / "such" / "folder" / "r.html")
    with qtbot.waitSignal(window.reports.failed, timeout=60_000) as failed:
        window.window_actions.save_report.trigger()
    assert failed.args[0].startswith("cannot write ") and "No such file or directory" in failed.args[0]
    assert window.state.status == f"Report not saved: {failed.args[0]}"
    box = window.reports.message_box
    assert box is not None and box.isVisible() and box.text() == failed.args[0]
    box.close()


def test_a_cancelled_dialog_writes_nothing(qtbot, report_window, runs_dir, monkeypatch):
    window = report_window
    assert window.files.open_run(str(write_run(runs_dir / "run-c")))
    monkeypatch.setattr(report_actions.QFileDialog, "getSaveFileName", lambda *args, **kwargs: ("", ""))
    window.window_actions.save_report.trigger()
    assert window.reports.job is None
