"""A run bundle opened in the window (dropped, or File -> Open run bundle…): checked and extracted
off the GUI thread into the window's temporary folder, then shown as the run; a bundle that does
not match its manifest is refused with its one line; the copies go when the window closes."""
from __future__ import annotations

import zipfile
from pathlib import Path

from report_runs import TEST_ACCURACY, write_run

from gui_app.core.bundle import write_bundle
from gui_app.ui.window import file_actions


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
