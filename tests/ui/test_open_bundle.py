"""A run bundle opened in the window (dropped, or File -> Open run bundle…): checked and extracted
off the GUI thread into the window's temporary folder, then shown as the run and listed as a row
of the run list; Resume continues it in a new run folder of the runs folder when its checkpoints
are inside, and says why not otherwise; a bundle that does not match its manifest is refused with
its one line; the copies go when the window closes."""
from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest
from report_runs import TEST_ACCURACY, write_run

from gui_app.core import events as ev
from gui_app.core import rundir
from gui_app.core.bundle import write_bundle
from gui_app.ui.window import file_actions
from gui_app.ui.window.run_rows import HOST


def _bundle(tmp_path: Path, with_model: bool = False) -> Path:
    run = write_run(tmp_path / "elsewhere" / "run-shared")
    (run / "model.keras").write_bytes(b"a model")
    (tmp_path / "mail").mkdir()
    return write_bundle(run, tmp_path / "mail" / "run-shared.zip", with_model=with_model)


def test_a_dropped_bundle_opens_as_the_run(qtbot, window, tmp_path):
    bundle = _bundle(tmp_path, with_model=True)
    before = bundle.read_bytes()
    with qtbot.waitSignal(window.files.bundles.opened, timeout=30_000) as opened:
        window.files.drop([str(bundle)])
    run = Path(opened.args[0])
    assert run.name == "run-shared" and run.parent.name.startswith("replica-studio-bundle-")
    assert window.state.shown_run == str(run)
    assert window.state.model_run() == str(run)  # its model is inside: Export and Try can use it
    evaluation = window.shown.history.evaluation
    assert evaluation is not None and evaluation.accuracy == TEST_ACCURACY
    assert window.state.status.startswith("Opened the bundle of run-shared")
    assert bundle.read_bytes() == before  # the bundle itself is never written
    window.files.bundles.close()
    assert not run.exists()  # the copy goes with the window


def test_open_run_bundle_from_the_file_menu_refuses_a_changed_bundle(qtbot, window, tmp_path, monkeypatch):
    bundle = _bundle(tmp_path)
    changed = tmp_path / "changed.zip"
    with zipfile.ZipFile(bundle) as src, zipfile.ZipFile(changed, "w") as dst:
        for info in src.infolist():
            data = src.read(info)
            dst.writestr(info.filename, data.replace(b"mnist_cnn", b"evil_cnn") if info.filename == "events.jsonl"
                         else data)
    monkeypatch.setattr(file_actions.QFileDialog, "getOpenFileName", lambda *args, **kwargs: (str(changed), ""))
    assert window.window_actions.open_bundle.isEnabled()
    with qtbot.waitSignal(window.files.bundles.failed, timeout=30_000) as failed:
        window.window_actions.open_bundle.trigger()
    assert "member 'events.jsonl' does not match its manifest" in failed.args[0]
    assert window.state.status == f"Bundle not opened: {failed.args[0]}"
    assert window.state.shown_run is None
    box = window.files.bundles.message_box
    assert box is not None and box.isVisible()
    box.close()


def _stopped_bundle(tmp_path: Path, with_checkpoints: bool) -> Path:
    """A run stopped at step 10 with a checkpoint there, bundled."""
    run = write_run(tmp_path / "elsewhere" / "run-stopped", steps=10, steps_per_epoch=5, status="stopped")
    with (run / "events.jsonl").open("a") as f:
        f.write(json.dumps(ev.encode(ev.Checkpoint(time=1.8e9, step=10))) + "\n")
    (run / "checkpoints").mkdir()
    (run / "checkpoints" / "ckpt-10.index").write_bytes(b"")  # the fake engine restores the step of its name
    (tmp_path / "mail").mkdir(exist_ok=True)
    return write_bundle(run, tmp_path / "mail" / f"run-stopped-{with_checkpoints}.zip",
                        with_checkpoints=with_checkpoints)


def test_an_opened_bundle_is_a_run_list_row_that_resumes_in_a_new_run_folder(qtbot, window, tmp_path, fake_engine):
    fake_engine.configure(steps=20)
    bundle = _stopped_bundle(tmp_path, with_checkpoints=True)
    sealed = bundle.read_bytes()
    with qtbot.waitSignal(window.files.bundles.opened, timeout=30_000) as opened:
        window.files.drop([str(bundle)])
    copy = opened.args[0]
    panel = window.runs
    assert panel.selected_paths() == [copy]  # its row, selected
    row = panel.tree.selectedItems()[0]
    assert row.text(HOST) == f"bundle {bundle.name}" and not panel.tree.isColumnHidden(HOST)
    assert panel.resume_button.isEnabled() and window.window_actions.resume_run.isEnabled()
    assert "new run folder" in panel.resume_button.toolTip() and "new run folder" in \
        window.window_actions.resume_run.toolTip()
    with qtbot.waitSignal(panel.filled, timeout=10_000):
        panel.refresh()
    assert copy in panel.selected_paths()  # a refresh of the runs folder keeps the bundle's row

    with qtbot.waitSignal(window.state.run_ended, timeout=60_000) as ended:
        panel.resume_button.click()
    status, run_dir, _ = ended.args
    resumed = Path(run_dir)
    assert status == "completed" and resumed.parent == Path(window.state.runs_dir)
    assert resumed.name == "run-stopped" and rundir.read_run(resumed).status == "completed"
    events = list(rundir.read_raw_events(resumed, parts=False))
    started = [e for e in events if isinstance(e, ev.RunStarted)][-1]
    assert started.resumed and started.start_step == 10
    steps = [e.step for e in events if isinstance(e, ev.Step)]
    assert steps == list(range(1, 11)) + list(range(11, started.total_steps + 1))  # the steps continue
    assert bundle.read_bytes() == sealed  # the bundle is only read
    assert rundir.read_run(copy).status == "stopped"  # and the window's copy is not resumed
    qtbot.waitUntil(lambda: str(resumed) in panel._items, timeout=10_000)  # a run of the run list


def test_a_bundle_without_checkpoints_or_model_says_why_resume_and_export_are_off(qtbot, window, tmp_path):
    bundle = _stopped_bundle(tmp_path, with_checkpoints=False)
    with qtbot.waitSignal(window.files.bundles.opened, timeout=30_000):
        window.files.drop([str(bundle)])
    panel, resume = window.runs, window.window_actions.resume_run
    assert not panel.resume_button.isEnabled() and not resume.isEnabled()
    assert "--with-checkpoints" in panel.resume_button.toolTip() and "--with-checkpoints" in resume.toolTip()
    assert not panel.export_button.isEnabled() and "--with-model" in panel.export_button.toolTip()


@pytest.mark.slow
def test_a_bundle_with_its_model_exports_from_its_row(qtbot, trained_run, tmp_path):
    """The real engine's run, bundled with its model, opened and exported by the real ``export``."""
    from gui_app.identity import app_command
    from gui_app.ui.window.main_window import MainWindow

    bundle = write_bundle(trained_run, tmp_path / "mailed.zip", with_model=True)
    window = MainWindow(runs_dir=tmp_path / "runs", engine_command=app_command)
    qtbot.addWidget(window)
    window.show()
    with qtbot.waitSignal(window.files.bundles.opened, timeout=30_000) as opened:
        window.files.drop([str(bundle)])
    assert window.runs.selected_paths() == [opened.args[0]] and window.runs.export_button.isEnabled()
    window.runs.export_button.click()
    dialog = window.models.export_dialog
    dialog._output.setText(str(tmp_path / "mailed.keras"))
    dialog._check.setValue(32)
    with qtbot.waitSignal(dialog.succeeded, timeout=120_000) as done:
        dialog.start()
    assert done.args[0].passed and (tmp_path / "mailed.keras").is_file()
    dialog.close()
    window.close()
