"""JobDialog, the base of the tool dialogs: run, progress, result, one error line, cancel, close
when done; on the Prepare dialog over the fake engine (the real engine: test_streaming_ui.py)."""
from __future__ import annotations

import json
import os
import sys

import pytest

import gui_app.ui.window.main_window as main_window_module
from gui_app.core.config import DatasetConfig
from gui_app.ui.colors import ERROR_STYLE
from gui_app.ui.dialogs.job_dialog import JobDialog
from gui_app.ui.dialogs.prepare import PrepareDialog
from gui_app.ui.window.tool_actions import TOOLS, Tool
from gui_app.ui.workers.engine_job import EngineJob

TIMEOUT_MS = 10_000

# An engine that says its pid in its first progress line and does not answer SIGTERM in time.
STUBBORN_PREPARE = r"""
import json, os, signal, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
print(json.dumps({"type": "progress", "stage": "write", "done": 0, "total": 100,
                  "message": f"pid {os.getpid()}"}), flush=True)
time.sleep(60)
"""


def _record(dialog: PrepareDialog) -> list[tuple]:
    """The dialog's outcome signals, in order."""
    seen: list[tuple] = []
    for name in ("succeeded", "failed", "job_ended"):
        getattr(dialog, name).connect(lambda *args, name=name: seen.append((name, *args)))
    return seen


@pytest.fixture
def dialog(qtbot, fake_engine, tmp_path):
    d = PrepareDialog(DatasetConfig(name="digits"), folder=tmp_path, engine_command=fake_engine)
    qtbot.addWidget(d)
    d._output.setText(str(tmp_path / "shards"))
    yield d
    d.shutdown()


def test_progress_then_the_result_and_the_buttons_that_follow(qtbot, dialog, tmp_path):
    bar, seen = [], _record(dialog)
    dialog._progress.valueChanged.connect(bar.append)
    with qtbot.waitSignal(dialog.job_ended, timeout=TIMEOUT_MS):
        dialog._run_button.click()
        assert dialog.is_running() and not dialog._run_button.isEnabled() and not dialog._output.isEnabled()
        assert dialog._close_button.text() == "Cancel" and not dialog._use.isEnabled()
    [(_, result), done] = seen
    assert done == ("job_ended",)
    assert result.output == str(tmp_path / "shards") and result.counts == {"train": 80, "test": 20}
    assert bar == [0, 400, 1000]  # the start, 40 and 100 of 100 images (0 of 100 and the result change nothing)
    assert dialog._status.text() == f"Wrote 80 training and 20 test images in 2 shards to {tmp_path / 'shards'} " \
                                    "(1,000 images/s)."
    assert dialog._status.styleSheet() == "" and dialog._use.isEnabled() and dialog._run_button.isEnabled()
    assert dialog._close_button.text() == "Close" and not dialog.is_running()
    with qtbot.waitSignal(dialog.use_shards) as used:
        dialog._use.click()
    assert used.args == [str(tmp_path / "shards")]


def test_a_failure_is_the_engine_s_one_line_in_the_error_style(qtbot, dialog, tmp_path):
    (tmp_path / "shards").mkdir()
    (tmp_path / "shards" / "old.tfrecord").write_bytes(b"")
    seen = _record(dialog)
    with qtbot.waitSignal(dialog.job_ended, timeout=TIMEOUT_MS):
        dialog.start()
    message = f"--output: {tmp_path / 'shards'} exists and is not an empty folder"
    assert seen == [("failed", message), ("job_ended",)]
    assert dialog._status.text() == message and dialog._status.styleSheet() == ERROR_STYLE
    assert dialog._progress.value() == 0 and dialog._run_button.isEnabled() and not dialog._use.isEnabled()


def test_an_empty_destination_is_said_and_nothing_runs(dialog):
    dialog._output.setText("  ")
    dialog.start()
    assert not dialog.is_running() and dialog._status.text() == "Choose a folder for the shards."


def test_cancel_ends_the_engine_and_says_what_it_left(qtbot, dialog, fake_engine):
    fake_engine.configure("wait")
    dialog.start()
    qtbot.waitUntil(lambda: dialog._status.text().startswith("Writing 0 of 100 images"), timeout=TIMEOUT_MS)
    seen = _record(dialog)
    with qtbot.waitSignal(dialog.job_ended, timeout=TIMEOUT_MS):
        dialog._close_button.click()  # "Cancel"
        assert dialog._status.text() == "Cancelling…" and not dialog._close_button.isEnabled()
    assert seen == [("failed", "Cancelled: the output folder may hold partial shards."), ("job_ended",)]
    assert dialog._status.styleSheet() == "" and not dialog.is_running()


def test_closing_while_it_runs_kills_a_stubborn_engine_and_closes_when_it_has_ended(qtbot, tmp_path, monkeypatch):
    monkeypatch.setattr(PrepareDialog, "cancel_grace_s", 0.3)
    dialog = PrepareDialog(DatasetConfig(name="digits"), folder=tmp_path,
                           engine_command=lambda *args: [sys.executable, "-c", STUBBORN_PREPARE, *args])
    qtbot.addWidget(dialog)
    dialog.show()
    dialog.start()
    qtbot.waitUntil(lambda: dialog._status.text().startswith("pid "), timeout=TIMEOUT_MS)
    pid = int(dialog._status.text().split()[1].rstrip("…"))
    with qtbot.waitSignal(dialog.failed, timeout=TIMEOUT_MS):
        dialog.close()  # the title bar's button: cancel, then close once the process has ended
        assert dialog.isVisible()
    assert not dialog.isVisible() and dialog._job.killed
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_the_fake_prepare_lines_have_the_real_progress_shape(fake_engine, tmp_path):
    """The fake engine's tool lines keep decoding as the real engine's do (gui_app.core.events)."""
    import subprocess

    from gui_app.core.events import Progress, decode

    done = subprocess.run(fake_engine("prepare", "c.json", "--output", str(tmp_path / "out"), "--json"),
                          capture_output=True, text=True, timeout=60, check=True)
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    progress = [decode(line) for line in lines[:-1]]
    assert all(isinstance(p, Progress) and p.stage == "write" and p.what == "images" for p in progress)
    assert [p.share() for p in progress] == [0.0, 0.4, 1.0] and lines[-1]["type"] == "prepared"


class DevicesDialog(JobDialog):
    """A made-up tool, written as a new one would be: how it opens, its job, how it shows the answer."""

    @classmethod
    def for_forms(cls, forms, parent, engine_command):
        return cls(parent, engine_command)

    def _make_job(self):
        return EngineJob(self._engine_command("devices", "--json"), name="device detection", parent=self)

    def _show_result(self, result):
        self._show_status(result["cpu"]["description"])


def test_a_new_tool_is_its_dialog_and_one_entry_in_the_list(qtbot, fake_engine, monkeypatch):
    tool = Tool("devices", "&Devices…", "The devices the engine sees", DevicesDialog, needs_valid_config=False)
    monkeypatch.setattr(main_window_module, "TOOLS", (*TOOLS, tool))
    window = main_window_module.MainWindow(engine_command=fake_engine)
    qtbot.addWidget(window)
    action = window.window_actions.tools["devices"]
    assert action.text() == "&Devices…" and action.toolTip() == "The devices the engine sees" and action.isEnabled()
    action.trigger()
    dialog = window.tools.dialog
    assert isinstance(dialog, DevicesDialog) and dialog.isVisible()
    with qtbot.waitSignal(dialog.succeeded, timeout=TIMEOUT_MS):
        dialog._run_button.click()
    assert dialog._status.text() == "Fake CPU"
    window.close()


# An export that writes nothing and answers as `export --json` does, for the file it was asked for.
ANSWERING_EXPORT = r"""
import json, sys
args = sys.argv[1:]
output, fmt = args[args.index("--output") + 1], args[args.index("--format") + 1]
print(json.dumps({"type": "export_result", "format": fmt, "path": output, "card_path": output + ".json",
                  "size_bytes": 1234, "parity": None, "passed": True, "written": True, "seconds": 0.5}), flush=True)
"""


def test_the_export_dialog_s_result_goes_when_its_inputs_change(qtbot, tmp_path):
    from gui_app.ui.dialogs.export import ExportDialog

    run = tmp_path / "run"
    (run / "model.keras").parent.mkdir()
    (run / "model.keras").write_bytes(b"")
    dialog = ExportDialog(run, "onnx", folder=tmp_path,
                          engine_command=lambda *args: [sys.executable, "-c", ANSWERING_EXPORT, *args[1:]])
    qtbot.addWidget(dialog)

    def export() -> None:
        with qtbot.waitSignal(dialog.succeeded, timeout=TIMEOUT_MS):
            dialog.start()
        assert dialog._report.isVisibleTo(dialog) and dialog._open_button.isEnabled()
        assert dialog._status.text() == f"Saved {dialog.output_path().name}."

    export()
    assert "run.onnx" in dialog._report.text()
    dialog._format.setCurrentIndex(dialog._format.findData("tflite-int8"))  # the ONNX result is not int8's
    assert not dialog._report.isVisibleTo(dialog) and dialog._report.text() == ""
    assert dialog._status.text() == "" and not dialog._open_button.isEnabled() and dialog._progress.value() == 0
    export()
    dialog._check.setValue(10)  # the check it ran with
    assert not dialog._report.isVisibleTo(dialog) and dialog._status.text() == ""
    export()
    dialog._output.setText(str(tmp_path / "elsewhere.tflite"))  # the file it wrote
    assert not dialog._report.isVisibleTo(dialog) and not dialog._open_button.isEnabled()
