"""The engine's command line in a subprocess, exactly as users and the GUI run it."""
from __future__ import annotations

import json
import os
import subprocess

import numpy as np
import pytest
from engine_helpers import REFERENCE, LineReader, config_dict, parse_jsonl, run_cli

from gui_app.core import rundir
from gui_app.identity import app_command, app_env


def test_reference_config_trains_two_replicas_to_95_percent(tmp_path, write_config):
    """The issue's config: digits, mnist_cnn, mirrored over CPU:0 and CPU:1, 5 epochs."""
    config = write_config(REFERENCE)
    proc = run_cli("train", str(config), "--runs-dir", str(tmp_path / "runs"), "--events", "jsonl")
    assert proc.returncode == 0, proc.stderr[-2000:]
    events = parse_jsonl(proc.stdout)  # stdout holds nothing but JSON events
    types = [e["type"] for e in events]
    assert types[0] == "run_started" and types[-1] == "run_finished"
    assert events[-1]["status"] == "completed"
    started = events[0]
    assert started["num_replicas"] == 2 and started["dataset"]["class_names"] == [str(i) for i in range(10)]
    assert started["cpu_cores"] == len(os.sched_getaffinity(0))  # whether its replicas share the cores
    steps = [e for e in events if e["type"] == "step"]
    assert [e["step"] for e in steps] == list(range(1, started["total_steps"] + 1))
    assert all(len(e["replicas"]) == 2 for e in steps)
    first, last = np.mean([e["loss"] for e in steps[:10]]), np.mean([e["loss"] for e in steps[-10:]])
    assert last < 0.3 * first  # the loss falls
    assert types.count("epoch_end") == 5

    evaluation = next(e for e in events if e["type"] == "eval")
    assert evaluation["accuracy"] >= 0.95
    cm = np.array(evaluation["confusion_matrix"])
    assert cm.shape == (10, 10) and cm.sum() == evaluation["examples"] == started["dataset"]["test_examples"]
    assert sum(evaluation["examples_per_replica"]) == evaluation["examples"]
    assert min(evaluation["examples_per_replica"]) > 0
    assert [c["support"] for c in evaluation["per_class"]] == cm.sum(axis=1).tolist()

    run_dir = tmp_path / "runs" / events[-1]["run_dir"].split("/")[-1]
    for name in ("config.json", "events.jsonl", "model.keras", "eval.json", "misclassified.npz"):
        assert (run_dir / name).is_file(), name
    assert list((run_dir / "checkpoints").glob("ckpt-*.index"))
    assert list((run_dir / "tensorboard" / "train").glob("events.out.tfevents.*"))
    assert parse_jsonl((run_dir / "events.jsonl").read_text()) == events


def test_stop_on_stdin_then_resume(tmp_path, write_config):
    config = write_config(config_dict(training={"epochs": 3, "steps_per_call": 2}))
    proc = subprocess.Popen(app_command("train", str(config), "--runs-dir", str(tmp_path), "--events", "jsonl",
                                           "--control", "stdin"),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            env=app_env())
    events = []
    for event in LineReader(proc.stdout).events(timeout=120):  # a hung engine fails, never hangs
        events.append(event)
        if events[-1]["type"] == "step" and events[-1]["step"] == 4:
            proc.stdin.write("pause\n")
            proc.stdin.flush()
        if events[-1]["type"] == "paused":
            proc.stdin.write("resume\n")  # the old word for "continue" is still understood
            proc.stdin.flush()
        if events[-1]["type"] == "continued":
            proc.stdin.write("stop\n")
            proc.stdin.flush()
    assert proc.wait(timeout=60) == 0
    types = [e["type"] for e in events]
    assert "paused" in types and "continued" in types
    assert events[-1]["status"] == "stopped" and events[-1]["step"] < 60
    run_dir = events[-1]["run_dir"]

    proc = run_cli("resume", run_dir, "--events", "jsonl")
    assert proc.returncode == 0, proc.stderr[-2000:]
    resumed = parse_jsonl(proc.stdout)
    assert resumed[0]["start_step"] == events[-1]["step"]
    assert resumed[-1]["status"] == "completed" and resumed[-1]["step"] == resumed[0]["total_steps"]
    assert rundir.read_run(run_dir).status == "completed"


def test_end_of_stdin_stops_the_run(tmp_path, write_config):
    """The supervisor died: the engine checkpoints and stops instead of training on alone."""
    config = write_config(config_dict(training={"epochs": 50}))
    proc = run_cli("train", str(config), "--runs-dir", str(tmp_path), "--events", "jsonl", "--control", "stdin",
                   stdin="")
    assert proc.returncode == 0
    events = parse_jsonl(proc.stdout)
    assert events[-1]["status"] == "stopped" and events[-1]["step"] < 50 * 20


@pytest.mark.parametrize("data, message", [
    ({"training": {"epochs": 0}}, "training.epochs: must be at least 1; got 0"),
    ({"training": {"learning_rate": -0.1}}, "training.learning_rate: must be > 0"),
    ({"training": {"batch": 3}}, "training.batch: unknown key"),
    ({"strategy": {"devices": ["CPU:0", "CPU:5"]}}, "strategy.devices: CPU:5 does not exist"),
    ({"training": {"epochs": "five"}}, "training.epochs: must be an integer"),
    # A NUL in a path printed raw hid the line that said what was wrong.
    ({"dataset": {"name": "npz", "path": "/data/mni\u0000st.npz"}},
     "dataset.path: contains the control character '\\x00' at position 9"),
])
def test_bad_config_exits_2_with_one_line(tmp_path, write_config, data, message):
    config = write_config(config_dict(**data))
    proc = run_cli("train", str(config), "--runs-dir", str(tmp_path), "--events", "text")
    assert proc.returncode == 2
    lines = [line for line in proc.stderr.splitlines() if line.startswith("replica-studio")]
    assert len(lines) == 1 and message in lines[0]
    # Said once in all (the text events repeated it twice, once ending in "(None)").
    assert (proc.stdout + proc.stderr).count(message) == 1 and "(None)" not in proc.stdout, proc.stdout
    assert "Traceback" not in proc.stderr
    assert not list(tmp_path.glob("*/model.keras"))


def test_unreadable_config_file(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    for path, message in ((bad, "config: not valid JSON"), (tmp_path / "missing.json", "cannot read")):
        proc = run_cli("train", str(path), "--runs-dir", str(tmp_path), "--events", "jsonl")
        assert proc.returncode == 2 and "Traceback" not in proc.stderr
        events = parse_jsonl(proc.stdout)
        assert [e["type"] for e in events] == ["error", "run_finished"]
        assert events[0]["kind"] == "config" and message in events[0]["message"]


def test_devices_json_lists_cpu_and_logical_devices():
    proc = run_cli("devices", "--json", "--cpu-devices", "3")
    assert proc.returncode == 0, proc.stderr[-2000:]
    info = json.loads(proc.stdout)
    assert info["cpu"]["cores"] >= 1 and info["gpus"] == []
    assert [d["name"].split("device:")[-1] for d in info["logical_devices"] if d["type"] == "CPU"] == \
        ["CPU:0", "CPU:1", "CPU:2"]
    assert info["tensorflow"].startswith("2.")
    # The typed answer the window reads (gui_app.core.answers, docs/answers.md) describes it exactly.
    from gui_app.core.answers import DevicesInfo, decode, encode, problems

    assert problems(DevicesInfo, info) == [] and encode(decode(DevicesInfo, info)) == info


def test_inspect_describes_dataset_and_model(tmp_path, write_config):
    config = write_config(REFERENCE)
    samples = tmp_path / "samples.npz"
    proc = run_cli("inspect", str(config), "--json", "--samples", str(samples))
    assert proc.returncode == 0, proc.stderr[-2000:]
    info = json.loads(proc.stdout)
    assert info["dataset"]["input_shape"] == [8, 8, 1] and info["dataset"]["train_examples"] == 1438
    # Conv 3x3x32 (320) + Dense 288->128 (36,992) + Dense 128->10 (1,290), plus the standardiser's 3 weights.
    assert info["model"]["trainable_parameters"] == 320 + 36992 + 1290
    with np.load(samples) as data:
        assert data["x"].shape[1:] == (8, 8, 1) and set(data["y"].tolist()) == set(range(10))
    bad = write_config(config_dict(model={"name": "cifar_cnn"}), "bad.json")
    proc = run_cli("inspect", str(bad), "--json")
    assert proc.returncode == 2 and "cifar_cnn cannot take 8x8x1" in proc.stderr and "Traceback" not in proc.stderr


def test_inspect_names_a_text_file_posing_as_a_keras_model_and_still_describes_the_dataset(tmp_path, write_config):
    """Keras said "File not found: filepath=..." of a file that exists, and the window lost the
    dataset's summary with the model's error."""
    model = tmp_path / "notmodel.keras"
    model.write_text("these are my notes, not a model\n")
    config = write_config(config_dict(model={"name": "keras_file", "path": str(model)}))
    expected = f"model.path: {model} is not a Keras model file (a .keras file is a zip archive; this one is text)"
    proc = run_cli("inspect", str(config), "--json")
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[-1] == f"replica-studio inspect: {expected}"
    answer = json.loads(proc.stdout)
    assert answer["model"] is None and answer["model_error"] == expected
    assert answer["dataset"]["train_examples"] == 1438  # the dataset is described all the same
    proc = run_cli("inspect", str(config))  # as a person reads it
    assert proc.returncode == 2 and proc.stdout.startswith("digits: ") and expected in proc.stderr


def test_killed_run_resumes_from_its_last_checkpoint(tmp_path, write_config):
    config = write_config(config_dict(training={"epochs": 2, "steps_per_call": 2, "checkpoint_every_steps": 4}))
    proc = subprocess.Popen(app_command("train", str(config), "--runs-dir", str(tmp_path), "--events", "jsonl"),
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=app_env())
    for event in LineReader(proc.stdout).events(timeout=120):
        if event["type"] == "checkpoint" and event["step"] >= 8:
            proc.kill()  # no run_finished: the process is gone as after a crash or power loss
            break
    proc.wait(timeout=30)
    info = rundir.list_runs(tmp_path)[0]
    assert info.status == "interrupted" and info.resumable
    proc = run_cli("resume", str(info.path), "--events", "jsonl")
    assert proc.returncode == 0, proc.stderr[-2000:]
    events = parse_jsonl(proc.stdout)
    assert events[0]["start_step"] >= 8 and events[-1]["status"] == "completed"
    assert rundir.read_run(info.path).status == "completed"


def test_a_reader_that_goes_away_gets_no_traceback(tmp_path):
    """`replica-studio runs | head -1`: the pipe's reader leaves before the listing is written."""
    for i in range(3):
        run = tmp_path / f"2026120{i}-000000-digits-mlp"
        run.mkdir()
        (run / "config.json").write_text("{}")
    proc = subprocess.Popen(app_command("runs", "--runs-dir", str(tmp_path)), env=app_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    proc.stdout.close()  # gone before the first line
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0 and err == "", err
