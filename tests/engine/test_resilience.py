"""Faults injected into real engine processes: the window dies, signals, control words, a torn
history, damaged checkpoints, a second writer. Each waits with a timeout, never a bare read."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import TypeVar

import pytest
from engine_helpers import config_dict, run_cli, start_engine

from gui_app.core import events as ev
from gui_app.core import rundir
from gui_app.engine.run.control import STOP_SIGNALS

E = TypeVar("E", bound=ev.Event)

LONG = {"epochs": 50, "steps_per_call": 2}


def _last(run_dir: Path, kind: type[E]) -> E:
    return [e for e in rundir.read_raw_events(run_dir) if isinstance(e, kind)][-1]


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
    finished = _last(Path(run_dir), ev.RunFinished)
    assert finished.status == "stopped" and finished.message == "the window went away"
    assert _last(Path(run_dir), ev.Checkpoint).step == finished.step
    assert list((Path(run_dir) / "checkpoints").glob(f"ckpt-{finished.step}.index"))
    info = rundir.read_run(run_dir)
    assert info.status == "stopped" and info.resumable
    proc.stdin.close()


@pytest.mark.parametrize("sig", STOP_SIGNALS)  # SIGINT, SIGTERM and SIGUSR1 (Slurm's warning before a time limit)
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


def test_attach_cuts_a_torn_last_line(tmp_path):
    from gui_app.core.events import RunStarted
    from gui_app.engine.run.event_writer import EventWriter

    (tmp_path / "events.jsonl").write_text('{"type":"step","step":1}\n{"type":"step","st')
    rundir.summarize_events(tmp_path)  # the run list's cache of this file
    assert (tmp_path / rundir.SUMMARY_FILE).exists()
    writer = EventWriter("none")
    writer.attach(tmp_path)
    writer.emit(RunStarted(run_dir=str(tmp_path), config={}, resumed=True, start_step=1))
    writer.close()
    lines = (tmp_path / "events.jsonl").read_text().splitlines()
    assert lines[0] == '{"type":"step","step":1}' and [json.loads(line)["type"] for line in lines] == [
        "step", "run_started"]
    # The file was replaced: the cache of the old one is gone; the writer keeps one of the new file.
    events = tmp_path / "events.jsonl"
    summary = tmp_path / rundir.SUMMARY_FILE
    if summary.exists():
        cached = json.loads(summary.read_text())
        assert (cached["inode"], cached["offset"]) == (events.stat().st_ino, events.stat().st_size)


def test_killed_run_resumed_has_one_point_per_step(tmp_path, write_config):
    """kill -9 between checkpoints (and a torn last line, as if it died mid-write), then resume:
    events.jsonl itself -- read line by line, not through rundir's readers -- holds each step and
    each epoch's end once, in order, and no torn line."""
    from engine_helpers import run_in_process

    config = write_config(config_dict(training={"epochs": 2, "steps_per_call": 2, "checkpoint_every_steps": 4}))
    proc, reader = start_engine("train", str(config), "--runs-dir", str(tmp_path), "--events", "jsonl", stdin=False)
    checkpoint = None
    for event in reader.events(timeout=120):
        if event["type"] == "checkpoint" and event["step"] >= 8:
            checkpoint = event["step"]
        if checkpoint and event["type"] == "step" and event["step"] >= checkpoint + 2:
            proc.send_signal(signal.SIGKILL)
            break
    _wait(proc, 30)
    run_dir = rundir.list_runs(tmp_path)[0].path
    with open(run_dir / "events.jsonl", "a") as f:
        f.write('{"type":"step","step":99')  # as if it died mid-write
    code, tap = run_in_process("resume", run_dir)
    assert code == 0
    assert tap.of("run_started")[0]["start_step"] >= checkpoint  # the newest one before the kill
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]  # no torn line
    total = tap.of("run_started")[0]["total_steps"]
    assert [e["step"] for e in events if e["type"] == "step"] == list(range(1, total + 1))
    assert [e["epoch"] for e in events if e["type"] == "epoch_end"] == [1, 2]
    assert [e["type"] for e in events].count("run_started") == 2
    assert rundir.read_run(run_dir).status == "completed"


def _stopped_run(tmp_path, write_config, stop_at=10, **training):
    """An in-process run stopped at ``stop_at`` with checkpoints every 4 steps: ckpt 4, 8, stop."""
    from engine_helpers import run_in_process

    from gui_app.engine.run.control import Control

    config = write_config(config_dict(training={"epochs": 2, "steps_per_call": 2, "checkpoint_every_steps": 4,
                                                **training}))
    control = Control()
    code, tap = run_in_process("train", config, tmp_path / "runs", control=control,
                               on_event=lambda e: e["type"] == "step" and e["step"] >= stop_at and
                               control.command("stop"))
    assert code == 0 and tap.events[-1]["status"] == "stopped"
    return Path(tap.events[-1]["run_dir"]), tap.events[-1]["step"]


def _damage(run_dir: Path, step: int) -> None:
    data = next((run_dir / "checkpoints").glob(f"ckpt-{step}.data-*"))
    blob = bytearray(data.read_bytes())
    blob[len(blob) // 3: len(blob) // 3 + 256] = b"\xff" * 256
    data.write_bytes(bytes(blob))


def test_damaged_newest_checkpoint_falls_back_to_the_previous(tmp_path, write_config):
    from engine_helpers import run_in_process

    run_dir, stopped = _stopped_run(tmp_path, write_config)
    kept = sorted(int(p.stem.split("-")[1]) for p in (run_dir / "checkpoints").glob("ckpt-*.index"))
    assert kept[-1] == stopped and len(kept) == 3
    _damage(run_dir, stopped)
    code, tap = run_in_process("resume", run_dir)
    assert code == 0
    assert tap.of("run_started")[0]["start_step"] == kept[-2]
    warnings = [e["message"] for e in tap.of("warning")]
    assert any(f"skipped checkpoint ckpt-{stopped}" in w for w in warnings), warnings
    assert tap.events[-1]["status"] == "completed"


def test_checkpoint_of_another_model_is_refused_not_half_loaded(tmp_path, write_config):
    from engine_helpers import run_in_process

    run_dir, _ = _stopped_run(tmp_path, write_config)
    data = json.loads((run_dir / "config.json").read_text())
    data["model"]["name"] = "mlp"
    (run_dir / "config.json").write_text(json.dumps(data))
    code, tap = run_in_process("resume", run_dir)
    assert code == 2
    assert "no usable checkpoint" in tap.of("error")[0]["message"]
    assert not (run_dir / "model.keras").exists()


def test_second_writer_is_refused_and_a_dead_holders_lock_is_taken_over(tmp_path, write_config):
    from gui_app.core.run_lock import LOCK_FILE, RunLock

    run_dir, _ = _stopped_run(tmp_path, write_config)
    before = (run_dir / "events.jsonl").read_bytes()
    with RunLock(run_dir):
        proc = run_cli("resume", str(run_dir), "--events", "jsonl", timeout=120)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert lines == [f"replica-studio resume: run {run_dir} is in use by process {os.getpid()}"]
    assert (run_dir / "events.jsonl").read_bytes() == before  # the refused one wrote nothing
    # A lock file left by a process that died (no flock held) does not block anyone.
    (run_dir / LOCK_FILE).write_text("999999\n")
    proc = run_cli("evaluate", str(run_dir), "--events", "none", timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_missing_bundled_dataset_is_one_line(tmp_path, monkeypatch):
    from gui_app.engine.datasets import bundled
    from gui_app.engine.datasets.base import DatasetError

    monkeypatch.setattr(bundled, "resource_path", lambda *parts: tmp_path.joinpath(*parts))
    with pytest.raises(DatasetError, match="the bundled digits dataset is missing from this installation"):
        bundled.load_digits()


def test_checkpoint_cadence_by_minutes_and_keep_last_k(tmp_path, write_config):
    from engine_helpers import run_in_process

    config = write_config(config_dict(training={"epochs": 1, "steps_per_call": 2, "checkpoint_every_minutes": 0.0005,
                                                "keep_checkpoints": 2}))
    code, tap = run_in_process("train", config, tmp_path)
    assert code == 0
    steps = [e["step"] for e in tap.of("checkpoint")]
    assert len(steps) > 3  # every 30 ms of training, plus the epoch end
    kept = sorted((Path(tap.events[-1]["run_dir"]) / "checkpoints").glob("ckpt-*.index"))
    assert len(kept) == 2
