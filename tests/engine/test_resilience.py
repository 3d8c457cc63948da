"""Faults injected into real engine processes: the window dies, signals, control words, a torn
history, damaged checkpoints, a second writer. Each waits with a timeout, never a bare read."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from gui_app.core import rundir

from engine_helpers import config_dict, run_cli, start_engine

LONG = {"epochs": 50, "steps_per_call": 2}


def _last(run_dir: Path, kind: str) -> dict:
    return [e for e in rundir.read_raw_events(run_dir) if e["type"] == kind][-1]


def _wait(proc: subprocess.Popen, seconds: float) -> int:
    try:
        return proc.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)
        raise AssertionError(f"the engine did not exit within {seconds} s") from None


def test_engine_outlives_its_window(tmp_path, write_config):
    """The window is killed: its end of the stdout pipe closes while stdin stays open (a
    grandparent may hold it). The next event write fails; the engine stops with a checkpoint and a
    durable run_finished within 10 s, and the run is listed as stopped and resumable."""
    config = write_config(config_dict(training=LONG))
    proc, reader = start_engine("train", str(config), "--runs-dir", str(tmp_path), "--events", "jsonl",
                                "--control", "stdin")
    run_dir = None
    for event in reader.events(timeout=120):
        run_dir = run_dir or event.get("run_dir")
        if event["type"] == "step" and event["step"] >= 3:
            break
    proc.stdout.close()  # the window's read end is gone: the next write is a broken pipe
    died = time.monotonic()
    code = _wait(proc, 10)
    assert time.monotonic() - died < 10
    assert code == 0, proc.stderr.read()[-2000:]
    finished = _last(Path(run_dir), "run_finished")
    assert finished["status"] == "stopped" and finished["message"] == "the window went away"
    assert _last(Path(run_dir), "checkpoint")["step"] == finished["step"]
    assert list((Path(run_dir) / "checkpoints").glob(f"ckpt-{finished['step']}.index"))
    info = rundir.read_run(run_dir)
    assert info.status == "stopped" and info.resumable
    proc.stdin.close()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_stops_with_a_checkpoint(tmp_path, write_config, sig):
    config = write_config(config_dict(training=LONG))
    proc, reader = start_engine("train", str(config), "--runs-dir", str(tmp_path), "--events", "jsonl")
    events = []
    for event in reader.events(timeout=120):
        events.append(event)
        if event["type"] == "step" and event["step"] == 2:
            proc.send_signal(sig)
    assert _wait(proc, 30) == 0
    assert events[-1]["type"] == "run_finished" and events[-1]["status"] == "stopped"
    assert events[-1]["message"] == f"stopped by {sig.name}"
    assert events[-2]["type"] == "checkpoint" and events[-2]["step"] == events[-1]["step"]


def test_checkpoint_word_and_hierarchical_copy(tmp_path, write_config):
    """``checkpoint`` on stdin writes one at the next step group, under hierarchical_copy."""
    config = write_config(config_dict(training={"epochs": 1, "steps_per_call": 2},
                                      strategy={"cross_device_ops": "hierarchical_copy"}))
    proc, reader = start_engine("train", str(config), "--runs-dir", str(tmp_path), "--events", "jsonl",
                                "--control", "stdin")
    events, asked = [], None
    for event in reader.events(timeout=120):
        events.append(event)
        if event["type"] == "step" and event["step"] == 4 and asked is None:
            asked = 4
            proc.stdin.write("checkpoint\n")
            proc.stdin.flush()
    assert _wait(proc, 30) == 0
    started = events[0]
    assert started["type"] == "run_started" and started["num_replicas"] == 2
    # Between CPU replicas hierarchical_copy is not defined: the engine says so and reduces to one.
    assert started["strategy"]["cross_device_ops"] == "reduce_to_one"
    assert any("hierarchical_copy works between GPUs only" in e["message"] for e in events if e["type"] == "warning")
    early = [e["step"] for e in events if e["type"] == "checkpoint" and e["step"] < started["steps_per_epoch"]]
    assert early and 4 <= early[0] <= 8
    assert events[-1]["status"] == "completed"
