"""File -> Export run to MLflow…: the run on screen written to a local MLflow tracking folder by the
real ``export-run`` command, run as an engine process; the question for the folder is patched (no
native dialog offscreen). That the window never imports MLflow is import-linter's contract."""
from __future__ import annotations

from pathlib import Path

import pytest
from report_runs import write_run
from windows import real_engine, shown_window

from gui_app.ui.window import mlflow_actions


@pytest.fixture
def mlflow_window(qtbot, fake_engine):
    with shown_window(qtbot, engine_command=real_engine(fake_engine)) as window:
        yield window


def _answer(monkeypatch, text: str, ok: bool = True) -> list[str]:
    asked: list[str] = []

    def get_text(parent, title, label, mode, default):
        asked.append(default)
        return text, ok

    monkeypatch.setattr(mlflow_actions.QInputDialog, "getText", get_text)
    return asked


def test_export_writes_the_run_on_screen_to_a_tracking_folder(qtbot, mlflow_window, runs_dir, tmp_path,
                                                               monkeypatch):
    pytest.importorskip("mlflow")  # the engine process imports it; this one only reads the store after
    window = mlflow_window
    action = window.window_actions.export_mlflow
    assert not action.isEnabled()  # no run on screen, none selected
    run = write_run(runs_dir / "run-m")
    assert window.files.open_run(str(run))
    assert action.isEnabled()
    store = tmp_path / "mlruns"
    asked = _answer(monkeypatch, str(store))
    with qtbot.waitSignal(window.mlflow.exported, timeout=120_000) as exported:
        action.trigger()
    answer = exported.args[0]
    assert asked == [str(Path.home() / "mlruns")]  # the first time: ~/mlruns proposed
    assert answer.action == "created" and answer.tracking_uri == store.as_uri()
    assert window.state.status.startswith(f"Run exported to MLflow at {store.as_uri()}: run {answer.run_id}")
    assert window.settings.last_mlflow_target == str(store)
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=store.as_uri())
    assert len(client.get_metric_history(answer.run_id, "replica_1/loss")) == 40
    # Again: the folder is proposed, and the run is not written twice.
    asked = _answer(monkeypatch, str(store))
    with qtbot.waitSignal(window.mlflow.exported, timeout=120_000) as again:
        action.trigger()
    assert asked == [str(store)]
    assert again.args[0].action == "unchanged" and again.args[0].run_id == answer.run_id
    assert window.state.status.startswith("Run already in MLflow at ")


def test_a_store_that_cannot_be_written_is_said(qtbot, mlflow_window, runs_dir, tmp_path, monkeypatch):
    window = mlflow_window
    assert window.files.open_run(str(write_run(runs_dir / "run-n")))
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    _answer(monkeypatch, str(blocker / "mlruns"))
    with qtbot.waitSignal(window.mlflow.failed, timeout=120_000) as failed:
        window.window_actions.export_mlflow.trigger()
    assert failed.args[0].startswith("cannot create the tracking folder ")
    assert window.state.status == f"Not exported to MLflow: {failed.args[0]}"
    box = window.mlflow.message_box
    assert box is not None and box.isVisible() and box.text() == failed.args[0]
    box.close()


def test_a_cancelled_question_exports_nothing(qtbot, mlflow_window, runs_dir, monkeypatch):
    window = mlflow_window
    assert window.files.open_run(str(write_run(runs_dir / "run-o")))
    _answer(monkeypatch, "/somewhere", ok=False)
    window.window_actions.export_mlflow.trigger()
    assert window.mlflow.job is None
