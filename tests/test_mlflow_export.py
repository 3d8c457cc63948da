"""``replica-studio export-run RUN_DIR --mlflow DIR``: the run written to a local MLflow file store
and read back by MLflow's own client -- every step's loss, each replica's keys, the validation
per epoch, the params, tags, artifacts and times; a second export leaves one run; bad input (not
a run, a store that cannot be written, MLflow missing) is one line and exit 2. No network: the
store is a folder."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from report_runs import TEST_ACCURACY, write_run

from gui_app.core import answers
from gui_app.core import events as ev
from gui_app.core.bundle import write_bundle
from gui_app.core.mlflow_run import IDENTITY_TAG
from gui_app.core.overrides import flatten
from gui_app.engine.commands import export_run
from gui_app.engine.commands.cli import build_parser
from gui_app.identity import app_command, app_env

STEPS, PER_EPOCH = 40, 10


@pytest.fixture
def run(tmp_path) -> Path:
    run = write_run(tmp_path / "runs" / "run-a", steps=STEPS, steps_per_epoch=PER_EPOCH)
    (run / "model.keras").write_bytes(b"model bytes" * 100)
    return run


def _export(capsys, run: Path | str, store: Path | str, *more: str) -> tuple[int, str, str]:
    # The command's handler in this process (cli.main would put its log filter on fd 2, past capsys).
    args = build_parser().parse_args(["export-run", str(run), "--mlflow", str(store), *more])
    code = args.handler(args)
    out, err = capsys.readouterr()
    return code, out, err


def _events(run: Path) -> list:
    return [ev.decode(json.loads(line)) for line in (run / "events.jsonl").read_text().splitlines()]


def _client(store: Path, monkeypatch):
    pytest.importorskip("mlflow")
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3.7+ reads its file store only when asked
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=store.as_uri())
    experiment = client.get_experiment_by_name(export_run.DEFAULT_EXPERIMENT)
    assert experiment is not None
    return client, client.search_runs([experiment.experiment_id])


def test_mlflow_reads_back_the_runs_figures(run, tmp_path, capsys, monkeypatch):
    pytest.importorskip("mlflow")
    store = tmp_path / "mlruns"
    code, out, err = _export(capsys, run, store, "--json")
    assert (code, err) == (0, "")
    answer = json.loads(out)
    assert answer["type"] == "mlflow_export" and answer["action"] == "created"
    assert answers.problems(answers.MlflowExport, answer) == []  # the class docs/answers.md documents
    assert answers.encode(answers.decode(answers.MlflowExport, answer)) == answer
    client, runs = _client(store, monkeypatch)
    assert [r.info.run_id for r in runs] == [answer["run_id"]]
    mlrun = runs[0]
    events = _events(run)
    steps = [e for e in events if isinstance(e, ev.Step)]
    epochs = [e for e in events if isinstance(e, ev.EpochEnd)]
    rid = mlrun.info.run_id

    def history(key: str) -> list[tuple[int, float]]:
        return sorted((m.step, m.value) for m in client.get_metric_history(rid, key))

    # Every step's training figures, at their steps (MLflow keeps float64 values exactly).
    assert history("loss") == [(s.step, s.loss) for s in steps] and len(steps) == STEPS
    assert history("accuracy") == [(s.step, s.accuracy) for s in steps]
    assert history("learning_rate") == [(s.step, s.learning_rate) for s in steps]
    assert history("examples_per_sec") == [(s.step, 560.0) for s in steps]
    # Each replica's own keys.
    for i in (0, 1):
        assert history(f"replica_{i}/loss") == [(s.step, s.replicas[i].loss) for s in steps]
        assert history(f"replica_{i}/examples_per_sec") == [(s.step, 320.0 - 80 * i) for s in steps]
    # The validation once per epoch, at the step the epoch ended on.
    assert history("val_loss") == [(e.step, e.val_loss) for e in epochs] and len(epochs) == STEPS // PER_EPOCH
    assert history("val_accuracy") == [(e.step, e.val_accuracy) for e in epochs]
    assert history("epoch") == [(e.step, float(e.epoch)) for e in epochs]
    assert mlrun.data.metrics["test_accuracy"] == TEST_ACCURACY
    # The config as params, the flattened keys the comparison shows.
    config = flatten(json.loads((run / "config.json").read_text()))
    assert mlrun.data.params == {k: v if isinstance(v, str) else json.dumps(v) for k, v in config.items()}
    assert mlrun.data.params["strategy.name"] == "mirrored"
    tags = mlrun.data.tags
    assert tags["strategy"] == "mirrored, 2 replicas (CPU:0, CPU:1)"
    assert (tags["devices"], tags["workers"], tags["replicas"], tags["status"]) == ("CPU:0, CPU:1", "1", "2",
                                                                                    "completed")
    assert tags["replica_studio.version"] and tags["mlflow.runName"] == "run-a"
    assert tags["dataset"] == "digits" and tags["model"] == "mnist_cnn"
    # Its times are the run's, its end status MLflow's word for completed.
    started, finished = events[0], events[-1]
    assert (mlrun.info.start_time, mlrun.info.end_time) == (round(started.time * 1000), round(finished.time * 1000))
    assert mlrun.info.status == "FINISHED"
    # The evaluation, the export's model card and the model as artifacts, byte for byte.
    names = {a.path for a in client.list_artifacts(rid)} | {a.path for a in client.list_artifacts(rid, "exports")}
    assert {"config.json", "eval.json", "model.keras", "exports/model-int8.tflite.json"} <= names
    local = Path(client.download_artifacts(rid, "model.keras", str(tmp_path / "dl")))
    assert local.read_bytes() == (run / "model.keras").read_bytes()


def test_exporting_twice_leaves_one_run_and_a_changed_run_replaces_it(run, tmp_path, capsys, monkeypatch):
    pytest.importorskip("mlflow")
    store = tmp_path / "mlruns"
    first = json.loads(_export(capsys, run, store, "--json")[1])
    code, out, _ = _export(capsys, run, store, "--json")
    again = json.loads(out)
    assert code == 0 and again["action"] == "unchanged" and again["run_id"] == first["run_id"]
    client, runs = _client(store, monkeypatch)
    assert [r.info.run_id for r in runs] == [first["run_id"]]
    assert len(client.get_metric_history(first["run_id"], "loss")) == STEPS  # not logged twice
    # The run evaluated again: the export is replaced, still one run, its curves not doubled.
    evaluation = json.loads((run / "eval.json").read_text())
    (run / "eval.json").write_text(json.dumps(evaluation | {"accuracy": 0.5}))
    code, out, _ = _export(capsys, run, store, "--json")
    replaced = json.loads(out)
    assert code == 0 and replaced["action"] == "replaced" and replaced["run_id"] != first["run_id"]
    client, runs = _client(store, monkeypatch)
    assert [r.info.run_id for r in runs] == [replaced["run_id"]]
    assert runs[0].data.tags[IDENTITY_TAG] == f"run-a@{round(_events(run)[0].time * 1000)}"
    assert len(client.get_metric_history(replaced["run_id"], "loss")) == STEPS


def test_a_bundle_is_exported_as_its_run(run, tmp_path, capsys, monkeypatch):
    pytest.importorskip("mlflow")
    bundle = write_bundle(run, tmp_path / "run-a.zip", with_model=True)
    store = tmp_path / "mlruns"
    code, out, err = _export(capsys, bundle, store)
    assert code == 0 and out.startswith("run-a: created MLflow run ") and err == ""
    code, out, _ = _export(capsys, run, store)  # the same run from its folder: the same identity
    assert code == 0 and out.startswith("run-a: unchanged MLflow run ")
    client, runs = _client(store, monkeypatch)
    assert len(runs) == 1 and len(client.get_metric_history(runs[0].info.run_id, "replica_1/loss")) == STEPS


def _one_line_exit_2(code: int, out: str, err: str) -> str:
    assert code == 2 and out == ""
    assert err.startswith("replica-studio export-run: ") and err.count("\n") == 1, err
    return err


def test_bad_input_is_one_line_and_exit_2(run, tmp_path, capsys):
    not_a_run = tmp_path / "notes"
    not_a_run.mkdir()
    err = _one_line_exit_2(*_export(capsys, not_a_run, tmp_path / "mlruns"))
    assert "not a run directory" in err
    err = _one_line_exit_2(*_export(capsys, tmp_path / "missing", tmp_path / "mlruns"))
    assert "no such" in err
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    err = _one_line_exit_2(*_export(capsys, run, blocker / "mlruns"))  # a store under a file: not creatable
    assert "cannot create the tracking folder" in err
    err = _one_line_exit_2(*_export(capsys, run, blocker))
    assert "not a folder" in err
    assert not (tmp_path / "mlruns").exists()  # nothing written for bad input


def test_without_mlflow_the_command_says_how_to_install_it(run, tmp_path, capsys, monkeypatch):
    # The import fails as it does where the extra is not installed (None in sys.modules: ImportError).
    for name in [n for n in sys.modules if n == "mlflow" or n.startswith("mlflow.")] + ["mlflow"]:
        monkeypatch.setitem(sys.modules, name, None)
    err = _one_line_exit_2(*_export(capsys, run, tmp_path / "mlruns"))
    assert "pip install 'replica-studio[mlflow]'" in err


def test_the_command_without_mlflow_in_its_environment(run, tmp_path):
    # A process whose `import mlflow` fails as an environment without the extra does.
    shadow = tmp_path / "shadow" / "mlflow"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError(\"No module named 'mlflow'\")\n")
    env = app_env()
    env["PYTHONPATH"] = os.pathsep.join([str(shadow.parent), env["PYTHONPATH"]])
    done = subprocess.run(app_command("export-run", str(run), "--mlflow", str(tmp_path / "mlruns")), env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines() == ["replica-studio export-run: " + export_run.INSTALL_HINT]


def test_a_folder_becomes_a_file_uri_and_a_uri_is_kept(tmp_path):
    assert export_run.tracking_uri(str(tmp_path / "store")) == (tmp_path / "store").as_uri()
    assert (tmp_path / "store").is_dir()
    assert export_run.tracking_uri("http://mlflow.example:5000") == "http://mlflow.example:5000"
    assert export_run.tracking_uri("file:///srv/mlruns") == "file:///srv/mlruns"
