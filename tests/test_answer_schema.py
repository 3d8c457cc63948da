"""The engine's command answers follow their classes (gui_app.core.answers): what each writer
prints has every always-written key with its JSON type, decodes to its class and encodes back to
the very same JSON (the wire did not change when the classes came), and a reader survives an
older or a broken line."""
from __future__ import annotations

import io
import json
from argparse import Namespace
from dataclasses import asdict
from pathlib import Path

import pytest

from gui_app.core import answers, scaling, scaling_options
from gui_app.core.answers import (
    LogLine,
    Prepared,
    RunRow,
    ScalingReport,
    ServeAnswer,
    ServeReady,
    SweepStatus,
    SweepTrial,
    decode,
    encode,
    problems,
)
from gui_app.core.config import RunConfig
from gui_app.core.live_runs import LiveRun, RunProcess
from gui_app.core.rundir import RunInfo


def _round_trip(cls: type, line: dict) -> None:
    assert problems(cls, line) == []
    answer = decode(cls, json.loads(json.dumps(line)))
    assert answer is not None and encode(answer) == line
    assert list(encode(answer)) == list(line)  # the keys in the writer's order too


def test_the_schema_catches_what_a_reader_would_trip_on():
    assert problems(SweepStatus, {"sweep_dir": "s"}) == [f"SweepStatus: missing {k!r}" for k in (
        "metric", "direction", "running", "stop_asked", "best", "trials", "importance")]
    bad = {"sweep_dir": "s", "metric": "val_loss", "direction": "minimize", "running": 1, "stop_asked": False,
           "best": None, "trials": [{"number": "0"}], "importance": {}}
    found = problems(SweepStatus, bad)
    assert "SweepStatus: 'running' is int" in found and "SweepStatus.trials[0]: 'number' is str" in found
    assert problems(LogLine, {"type": "log", "next": True}) == ["LogLine: 'next' is a boolean"]
    assert problems(LogLine, {"type": "log", "next": 3}) == []  # `line` is optional


def test_readers_take_old_and_broken_lines():
    assert decode(SweepStatus, ["not", "an", "object"]) is None and decode(LogLine, {"type": "log"}) is None
    old = decode(SweepStatus, {"sweep_dir": "s", "trials": [{"number": 2, "state": "completed"}, {"state": "x"}]})
    assert old is not None and [t.number for t in old.trials] == [2] and old.importance == {} and not old.running
    with pytest.raises(ValueError, match="not a Prepared answer"):
        answers.reader(Prepared)({"type": "prepared"})  # no output


class _Folder:
    path = Path("/sweeps/lr")
    stop_asked = False

    def runner_pid(self) -> int | None:
        return 4242


def test_sweep_status_is_written_as_before():
    from gui_app.engine.sweep.status import as_json

    rows = [SweepTrial(0, "completed", {"training.learning_rate": 0.01}, 0.93, 2, "/runs/a", "0", 61.5, None, None),
            SweepTrial(1, "running", {"training.learning_rate": 0.1}, None, 1, "/runs/b", None, 3.0, None, "gpu1")]
    line = as_json(_Folder(), rows, "val_accuracy", "maximize", {"training.learning_rate": 1.0})  # type: ignore[arg-type]
    # What the hand-written dict was: asdict of each row, in this order.
    assert line == {"sweep_dir": "/sweeps/lr", "metric": "val_accuracy", "direction": "maximize", "running": True,
                    "stop_asked": False, "best": asdict(rows[0]), "trials": [asdict(r) for r in rows],
                    "importance": {"training.learning_rate": 1.0}}
    _round_trip(SweepStatus, line)


def test_the_scaling_report_with_its_options_round_trips():
    config = {"dataset": {"name": "digits"}, "model": {"name": "mnist_cnn"}, "runtime": {"cpu_devices": 1},
              "training": {"global_batch_size": 64, "seed": 1}}
    plan = scaling.candidates(config, 2, ("mirrored",)) + scaling_options.option_candidates(config, 2, ("mirrored",))
    bursts = [scaling.Burst(c, examples_per_sec=1000.0 * (i + 1), steps=10, compute_s=0.02, input_s=0.01,
                            other_s=0.01, loss=0.5, devices=["CPU:0"]) for i, c in enumerate(plan)]
    bursts[-1].error, bursts[-1].examples_per_sec = "out of memory", None
    data = scaling_options.report(bursts, on_gpus=False)
    assert data["options"] and data["rows"]
    _round_trip(ScalingReport, json.loads(scaling.to_json(data)))  # scaling.json
    _round_trip(ScalingReport, {"type": "scaling_report", "path": "/r/scaling.json", **data})  # the stdout line


def test_runs_rows_are_written_as_before(tmp_path):
    info = RunInfo(tmp_path, RunConfig(), "completed", started=1.7e9, step=10, total_steps=10, test_accuracy=0.9)
    process = RunProcess(pid=42, host="here", command="train", detached=True, started=1.7e9)
    for run in (LiveRun(info, None), LiveRun(info, process)):
        row = run.to_json()
        assert list(row)[:3] == ["run_dir", "name", "status"] and list(row)[-2:] == ["owner", "own"]
        _round_trip(RunRow, row)


class _Predictor:
    source, kind, class_names, input_shape = Path("/m/digits.keras"), "keras", ["0", "1"], (8, 8, 1)
    warnings: list[str] = []
    dataset_config = None
    dark_background = True


def test_predict_serve_lines_follow_their_classes():
    from gui_app.engine.commands.predict import _serve_lines

    out = io.StringIO()
    requests = 'not json\n{"id": 7, "images": "seven.png"}\n{"id": 8, "invert": "x", "images": []}\n'
    args = Namespace(model="/m/digits.keras", allow_unverified_savedmodel=False, top=5)
    assert _serve_lines(args, io.StringIO(requests), out, lambda *a, **k: _Predictor()) == 0
    ready, *errors = [json.loads(line) for line in out.getvalue().splitlines()]
    assert ready == {"type": "ready", "model": "/m/digits.keras", "kind": "keras", "class_names": ["0", "1"],
                     "input_shape": [8, 8, 1], "warnings": [], "has_test_set": False, "dark_background": True}
    _round_trip(ServeReady, ready)
    assert [(e["type"], e["id"]) for e in errors] == [("error", None), ("error", 7), ("error", 8)]
    for line in errors:
        assert list(line) == ["type", "id", "message"]
        _round_trip(ServeAnswer, line)
    _round_trip(ServeAnswer, {"type": "error", "id": 3, "image": "a.png", "message": "cannot read"})
    _round_trip(ServeAnswer, {"type": "predictions", "id": 3, "predictions": [{"source": "a.png", "label": None}]})


def test_log_lines_follow_their_class(tmp_path, capfdbinary):
    from gui_app.core.line_follow import LineFollower
    from gui_app.engine.commands.log import _copy

    log = tmp_path / "engine.log"
    log.write_bytes(b"first\nsecond\r\nhalf")
    with LineFollower(log) as follower:
        assert _copy(follower, as_json=True, last=True)
        assert follower.offset == len(b"first\nsecond\r\nhalf")
    lines = [json.loads(line) for line in capfdbinary.readouterr().out.splitlines()]
    assert lines == [{"type": "log", "line": "first", "next": 6}, {"type": "log", "line": "second", "next": 14},
                     {"type": "log", "line": "half", "next": 18}]
    for line in [*lines, {"type": "log", "next": 18}]:
        _round_trip(LogLine, line)


def test_prepared_is_written_as_before():
    line = encode(Prepared("prepared", "/shards", {"train": 80, "test": 20}, 10, 2, 1.5, 66.7))
    assert list(line) == ["type", "output", "counts", "classes", "shards", "seconds", "images_per_sec"]
    _round_trip(Prepared, line)
    assert decode(Prepared, line).train == 80  # type: ignore[union-attr]


def test_diagnose_answers_follow_their_class(tmp_path, capsys):
    from gui_app.core.answers import Diagnosis
    from gui_app.core.config import RunConfig
    from gui_app.core.events import NonFinite, ReplicaStats, RunStarted, Step
    from gui_app.core.events import encode as encode_event
    from gui_app.engine.commands.cli import build_parser

    RunConfig().save(tmp_path / "config.json")
    steps = [Step(time=1.0 + n, step=n, replicas=[ReplicaStats(replica=0, loss=1.0, grad_norm=10.0 ** n)])
             for n in (1, 2, 3)]
    events = [RunStarted(time=1.0, run_dir=str(tmp_path), config={}), *steps,
              NonFinite(time=5.0, step=4, replica=0, worker=0, replicas=[0])]
    (tmp_path / "events.jsonl").write_text("".join(json.dumps(encode_event(e)) + "\n" for e in events))
    args = build_parser().parse_args(["diagnose", str(tmp_path), "--json"])
    assert args.handler(args) == 0
    line = json.loads(capsys.readouterr().out)
    assert [f["kind"] for f in line["findings"]] == ["non_finite"] and line["findings"][0]["share"] is None
    _round_trip(Diagnosis, line)


def test_hosts_fetch_answers_with_its_class_and_refuses_a_missing_folder(tmp_path, capsys, monkeypatch):
    from gui_app.core.answers import Fetched
    from gui_app.engine.commands import hosts
    from gui_app.engine.commands.cli import build_parser

    there = tmp_path / "there"
    there.mkdir()
    (there / "misclassified.npz").write_bytes(b"npz")
    # The copy itself is ssh_files.fetch (tests/core/test_ssh_files.py): a local copy here.
    monkeypatch.setattr(hosts, "fetch", lambda host, path, folder: (folder / Path(path).name).write_bytes(
        Path(path).read_bytes()))
    here = tmp_path / "here"
    here.mkdir()
    args = build_parser().parse_args(["hosts", "fetch", "gpu1", str(there / "misclassified.npz"), "--to", str(here),
                                      "--json"])
    assert args.handler(args) == 0
    line = json.loads(capsys.readouterr().out)
    assert line == {"type": "fetched", "path": str(here / "misclassified.npz")}
    assert (here / "misclassified.npz").read_bytes() == b"npz"
    _round_trip(Fetched, line)
    args = build_parser().parse_args(["hosts", "fetch", "gpu1", "/x", "--to", str(tmp_path / "none"), "--json"])
    assert args.handler(args) == 2
    said = capsys.readouterr().err.strip()
    assert said == f"replica-studio hosts fetch: --to {tmp_path / 'none'}: no such folder here"
