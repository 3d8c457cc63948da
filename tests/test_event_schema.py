"""One event protocol (gui_app.core.events, docs/events.md) for the real engine and the UI tests'
fake engine: what passes with the fake passes with the real one. The schema is derived from the
event classes: every key an event always carries, with its JSON type."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gui_app.core.event_schema import event_problems, stream_problems
from gui_app.core.rundir import EVENTS_FILE
from gui_app.identity import app_command, app_env

FAKE_ENGINE = Path(__file__).parent / "ui" / "fake_engine.py"
CONFIG = {"dataset": {"name": "digits"}, "model": {"name": "mnist_cnn"},
          "strategy": {"name": "mirrored", "devices": ["CPU:0", "CPU:1"]},
          "training": {"epochs": 2, "global_batch_size": 32}, "runtime": {"cpu_devices": 2}}


def _per_process(events: list[dict]) -> list[list[dict]]:
    """events.jsonl holds one stream per process (a resume appends): split at run_started."""
    streams: list[list[dict]] = []
    for event in events:
        if event.get("type") == "run_started" or not streams:
            streams.append([])
        streams[-1].append(event)
    return streams


def _lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def test_the_schema_catches_what_a_reader_would_trip_on():
    assert event_problems({"type": "step", "time": 1.0}) != []
    assert event_problems({"type": "stpe", "time": 1.0}) == ["unknown event type 'stpe'"]
    assert event_problems({"type": "run_finished", "time": 1.0, "status": "failed", "run_dir": None, "step": 0}) == [
        "run_finished: a failed run says why in 'message'"]
    assert event_problems({"type": "paused", "time": 1.0, "step": True}) == ["paused: 'step' is a boolean"]
    step = {"type": "step", "time": 1.0, "step": 3, "epoch": 1, "loss": None, "accuracy": None, "learning_rate": None,
            "examples_per_sec": None, "step_time": None, "replicas": []}
    gpu = {"index": 0, "name": "NVIDIA A100", "utilization": 87.0, "memory_used": 1, "memory_total": 2,
           "temperature": None, "power": None}  # a card without the sensor reports null
    assert event_problems({**step, "gpus": [gpu]}) == []
    assert (event_problems({**step, "gpus": [{**gpu, "utilization": "87 %"}]})
            == ["step 3 gpus[0]: 'utilization' is str"])


def test_the_real_engine_follows_the_protocol(trained_run):
    events = _lines((trained_run / EVENTS_FILE).read_text(encoding="utf-8"))
    assert {"run_started", "step", "epoch_end", "checkpoint", "eval", "run_finished"} <= {e["type"] for e in events}
    for stream in _per_process(events):
        assert stream_problems(stream) == []


def test_the_real_engine_fails_by_the_protocol(tmp_path):
    config = tmp_path / "bad.json"
    config.write_text(json.dumps({**CONFIG, "dataset": {"name": "npz", "path": str(tmp_path / "missing.npz")}}))
    done = subprocess.run(app_command("train", str(config), "--runs-dir", str(tmp_path / "runs"), "--events",
                                      "jsonl"), capture_output=True, text=True, timeout=120, env=app_env())
    events = _lines(done.stdout)
    assert done.returncode == 2 and stream_problems(events) == []
    assert [e["type"] for e in events] == ["error", "run_finished"] and events[-1]["status"] == "failed"


@pytest.mark.parametrize("mode,words", [("normal", ""), ("wait", "pause\nresume\nstop\n")])
def test_the_fake_engine_follows_the_same_protocol(tmp_path, mode, words):
    config = tmp_path / "config.json"
    config.write_text(json.dumps(CONFIG))
    control = ["--control", "stdin"] if words else []
    done = subprocess.run([sys.executable, str(FAKE_ENGINE), "train", str(config), "--runs-dir", str(tmp_path),
                           "--events", "jsonl", *control], input=words, capture_output=True, text=True, timeout=30,
                          env={"FAKE_ENGINE_MODE": mode, "PATH": "/usr/bin:/bin"})
    events = _lines(done.stdout)
    assert done.returncode == 0 and stream_problems(events) == []
    assert events[-1]["status"] == ("completed" if mode == "normal" else "stopped")


def test_the_fake_engine_fails_as_the_real_one_does(tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({**CONFIG, "dataset": {"name": "npz", "path": str(tmp_path / "missing.npz")}}))
    done = subprocess.run([sys.executable, str(FAKE_ENGINE), "train", str(config), "--runs-dir", str(tmp_path / "r"),
                           "--events", "jsonl"],
                          capture_output=True, text=True, timeout=30, env={"PATH": "/usr/bin:/bin"})
    events = _lines(done.stdout)
    assert done.returncode == 2 and stream_problems(events) == []
    assert [e["type"] for e in events] == ["error", "run_finished"]
    assert (done.stderr.strip().splitlines()[-1]
            == f"replica-studio train: {tmp_path / 'missing.npz'}: no such file or folder")
