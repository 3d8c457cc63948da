"""Runs that live on their own (docs/detached.md), with real engine processes: ``train
--detach``, ``attach``, ``stop``, ``runs``; attachments that come and go, signals, the death
of the process and the session that started a run, and a run started without ``--detach``.
Every wait has a timeout; conditions are waited on, never a fixed time."""
from __future__ import annotations

import json
import os
import shlex
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest
from engine_helpers import LineReader, run_cli, start_engine, until

from gui_app.core.live_runs import read_process
from gui_app.engine.run.control_fifo import CHANNEL_DIR, send
from gui_app.identity import app_command, app_env

MLP = {"dataset": {"name": "digits"}, "model": {"name": "mlp"}}
SHORT = {**MLP, "training": {"epochs": 3, "global_batch_size": 32, "seed": 1, "steps_per_call": 1}}
LONG = {**MLP, "training": {"epochs": 200, "global_batch_size": 32, "seed": 1, "steps_per_call": 1}}


def _detach(config: Path, runs: Path) -> Path:
    done = run_cli("train", str(config), "--runs-dir", str(runs), "--detach", timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    (line,) = done.stdout.splitlines()  # the run directory, and nothing else
    return Path(line)


def _attach(run_dir: Path, *args: str) -> tuple[subprocess.Popen, LineReader]:
    proc = subprocess.Popen(app_command("attach", str(run_dir), *args), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=app_env())
    return proc, LineReader(proc.stdout)


def _say(proc: subprocess.Popen, word: str) -> None:
    proc.stdin.write(word + "\n")
    proc.stdin.flush()


def _until_event(reader: LineReader, seen: list[dict], test, timeout: float = 120) -> dict:
    for event in reader.events(timeout=timeout):
        seen.append(event)
        if test(event):
            return event
    raise AssertionError(f"the stream ended before the event; last: {seen[-1:]}")



def _wait(proc: subprocess.Popen, timeout: float = 120) -> int:
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise AssertionError(f"{proc.args[:4]} did not end within {timeout} s") from None


def _runs(runs: Path) -> list[dict]:
    done = run_cli("runs", "--json", "--runs-dir", str(runs), timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _steps(events: list[dict]) -> list[int]:
    return [e["step"] for e in events if e["type"] == "step"]


@pytest.mark.slow
def test_detach_returns_once_started_and_attach_replays_then_follows_to_the_end(tmp_path, write_config):
    runs = tmp_path / "runs"
    began = time.monotonic()
    run_dir = _detach(write_config(SHORT), runs)
    assert time.monotonic() - began < 90  # TensorFlow's start on a loaded 2-core machine, not the training
    lines = (run_dir / "events.jsonl").read_text().splitlines()
    assert any(json.loads(line)["type"] == "run_started" for line in lines)  # in the file when it returned
    send(run_dir, "pause")  # hold it, so that what follows is live
    proc, reader = _attach(run_dir)
    seen: list[dict] = []
    _until_event(reader, seen, lambda e: e["type"] == "paused")
    replayed = len(seen)
    _say(proc, "continue")
    seen += list(reader.events(timeout=120))
    assert _wait(proc) == 0, proc.stderr.read()
    started, finished = seen[0], seen[-1]
    assert started["type"] == "run_started" and finished["type"] == "run_finished"
    assert finished["status"] == "completed"
    assert _steps(seen) == list(range(1, started["total_steps"] + 1))  # every step once, in order
    assert [e["type"] for e in seen[replayed:]].count("step") > 0 and "continued" in [e["type"] for e in seen]
    raw = (run_dir / "events.jsonl").read_text()
    assert [json.loads(line) for line in raw.splitlines()] == seen  # attach gave the file, line for line
    # --from N: the lines from the Nth on; a finished run is replayed and attach exits 0.
    done = run_cli("attach", str(run_dir), "--from", "5", "--control", "none", timeout=60)
    assert done.returncode == 0 and done.stdout == "".join(line + "\n" for line in raw.splitlines()[5:])
    (listed,) = _runs(runs)
    assert (listed["status"], listed["pid"], listed["step"]) == ("completed", None, started["total_steps"])
    assert not (run_dir / CHANNEL_DIR).exists()


@pytest.mark.slow
def test_attachments_come_and_go_and_stop_ends_the_run_with_a_checkpoint(tmp_path, write_config):
    runs = tmp_path / "runs"
    run_dir = _detach(write_config(LONG), runs)
    process = read_process(run_dir)
    first, reader = _attach(run_dir)
    _until_event(reader, [], lambda e: e["type"] == "step" and e["step"] >= 3)
    (listed,) = _runs(runs)
    assert (listed["status"], listed["pid"], listed["host"]) == ("running", process.pid, socket.gethostname())
    assert listed["step"] >= 3 and listed["total_steps"] > 1000 and listed["detached"] is True
    first.kill()  # an attachment killed without a word: the run goes on
    _wait(first)
    second, reader = _attach(run_dir)
    seen: list[dict] = []
    _until_event(reader, seen, lambda e: e["type"] == "step" and e["step"] > listed["step"] + 2)
    _say(second, "pause")
    paused = _until_event(reader, seen, lambda e: e["type"] == "paused")
    _say(second, "continue")
    _until_event(reader, seen, lambda e: e["type"] == "continued")
    assert _runs(runs)[0]["status"] == "running"
    brief = run_cli("attach", str(run_dir), stdin="", timeout=60)  # its stdin ends at once: it detaches
    assert brief.returncode == 0 and _runs(runs)[0]["status"] == "running"
    stopped = run_cli("stop", str(run_dir), timeout=120)
    assert stopped.returncode == 0, stopped.stderr
    seen += list(reader.events(timeout=60))
    assert _wait(second) == 0
    finished = seen[-1]
    assert stopped.stdout == f"{run_dir}: stopped at step {finished['step']}\n"
    assert finished["status"] == "stopped" and "message" not in finished  # a user's stop
    assert [e["step"] for e in seen if e["type"] == "checkpoint"][-1] == finished["step"] > paused["step"]
    assert _steps(seen) == list(range(1, finished["step"] + 1))  # the second attach: every step once
    assert (run_dir / "checkpoints" / f"ckpt-{finished['step']}.index").is_file()
    (listed,) = _runs(runs)
    assert (listed["status"], listed["pid"]) == ("stopped", None)
    again = run_cli("stop", str(run_dir), timeout=60)
    assert (again.returncode, again.stdout) == (0, f"{run_dir}: not running (stopped at step {finished['step']})\n")


@pytest.mark.slow
def test_the_run_outlives_its_starter_and_its_session_and_stops_on_sigterm(tmp_path, write_config):
    """Started from a shell that leads a session of its own (a terminal's, an ssh login's); the
    shell's whole process group -- the shell and the starting process, before the run said it
    started -- is sent SIGHUP and killed. The run goes on, ignores SIGHUP, and SIGTERM stops it
    with a checkpoint."""
    runs = tmp_path / "runs"
    train = shlex.join(app_command("train", str(write_config(LONG)), "--runs-dir", str(runs), "--detach"))
    shell = subprocess.Popen(["sh", "-c", f"{train}; exec sleep 600"], start_new_session=True,
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             env=app_env())
    (recorded,) = until(lambda: list(runs.glob("*/process.json")), 120, "run recording its process")
    run_dir = recorded.parent
    os.killpg(shell.pid, signal.SIGHUP)  # a logout
    os.killpg(shell.pid, signal.SIGKILL)
    _wait(shell)
    pid = read_process(run_dir).pid
    assert pid != shell.pid and os.getsid(pid) == pid  # a session of its own
    proc, reader = _attach(run_dir, "--control", "none")
    seen: list[dict] = []
    _until_event(reader, seen, lambda e: e["type"] == "step" and e["step"] >= 3)
    os.kill(pid, signal.SIGHUP)
    first = _until_event(reader, seen, lambda e: e["type"] == "step")["step"]
    _until_event(reader, seen, lambda e: e["type"] == "step" and e["step"] >= first + 3)  # still training
    os.kill(pid, signal.SIGTERM)
    seen += list(reader.events(timeout=60))
    assert _wait(proc) == 0, proc.stderr.read()
    finished = seen[-1]
    assert (finished["status"], finished["message"]) == ("stopped", "stopped by SIGTERM")
    assert seen[-2]["type"] == "checkpoint" and seen[-2]["step"] == finished["step"]
    assert _steps(seen) == list(range(1, finished["step"] + 1))


@pytest.mark.slow
def test_a_run_started_without_detach_is_attached_to_and_stopped(tmp_path, write_config):
    engine, out = start_engine("train", str(write_config(LONG)), "--runs-dir", str(tmp_path), "--events", "jsonl",
                               stdin=False)
    own: list[dict] = []
    _until_event(out, own, lambda e: e["type"] == "step" and e["step"] >= 2)
    run_dir = Path(own[0]["run_dir"])
    proc, reader = _attach(run_dir, "--control", "none")
    seen: list[dict] = []
    _until_event(reader, seen, lambda e: e["type"] == "step")
    process = read_process(run_dir)
    assert process.detached is False and process.pid == engine.pid
    # stop's wait is bounded: with no time to wait it says so in one line; the run stops all the same.
    stopped = run_cli("stop", str(run_dir), "--timeout", "0", timeout=120)
    assert stopped.returncode == 1 and stopped.stdout == ""
    assert stopped.stderr.startswith(f"replica-studio stop: {run_dir} is still running 0 s after 'stop' was sent "
                                     f"(process {engine.pid} on {socket.gethostname()})")
    own += list(out.events(timeout=60))
    seen += list(reader.events(timeout=60))
    assert _wait(engine) == 0 and _wait(proc) == 0
    assert own[-1]["status"] == seen[-1]["status"] == "stopped"
    assert _steps(seen) == _steps(own) == list(range(1, own[-1]["step"] + 1))


@pytest.mark.slow
def test_a_detached_run_refused_is_its_own_one_line_and_exit_2(tmp_path, write_config):
    runs = tmp_path / "runs"
    bad = write_config({**SHORT, "training": {**SHORT["training"], "learning_rate": -1}})
    done = run_cli("train", str(bad), "--runs-dir", str(runs), "--detach", timeout=120)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.splitlines() == ["replica-studio train: training.learning_rate: must be > 0; got -1.0"]
    missing = write_config({**SHORT, "dataset": {"name": "npz", "path": str(tmp_path / "none.npz")}}, "missing.json")
    done = run_cli("train", str(missing), "--runs-dir", str(runs), "--detach", timeout=180)
    assert (done.returncode, done.stdout) == (2, "")
    (line,) = done.stderr.splitlines()
    assert line.startswith("replica-studio train: ") and "none.npz" in line
    assert not list(runs.iterdir())  # refused before it trained: nothing half-made is left
    done = run_cli("train", str(missing), "--detach", "--control", "stdin", timeout=60)
    assert done.returncode == 2 and "a detached run reads no stdin" in done.stderr


@pytest.mark.slow
def test_a_killed_run_is_interrupted_and_resume_detach_goes_on_with_each_step_once(tmp_path, write_config):
    """kill -9 of the run between checkpoints: attach says so in one line and exits 1, ``runs``
    says interrupted; ``resume --detach`` goes on from the checkpoint, and the file -- read
    itself -- holds each step once."""
    runs = tmp_path / "runs"
    config = {**LONG, "training": {**LONG["training"], "checkpoint_every_steps": 10}}
    run_dir = _detach(write_config(config), runs)
    pid = read_process(run_dir).pid
    proc, reader = _attach(run_dir, "--control", "none")
    seen: list[dict] = []
    saved = _until_event(reader, seen, lambda e: e["type"] == "checkpoint" and e["step"] >= 10)["step"]
    _until_event(reader, seen, lambda e: e["type"] == "step" and e["step"] >= saved + 3)
    os.kill(pid, signal.SIGKILL)
    seen += list(reader.events(timeout=60))
    assert _wait(proc) == 1
    assert proc.stderr.read().splitlines()[-1] == (
        f"replica-studio attach: {run_dir}: its process is gone without finishing the run (killed, crashed, or "
        f"its machine went down): the run is interrupted; resume it with: replica-studio resume {run_dir}")
    assert _runs(runs)[0]["status"] == "interrupted"
    done = run_cli("resume", str(run_dir), "--detach", timeout=180)
    assert (done.returncode, done.stdout) == (0, f"{run_dir}\n"), done.stderr[-2000:]
    assert run_cli("stop", str(run_dir), timeout=120).returncode == 0
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    resumed = [e for e in events if e["type"] == "run_started"][-1]
    assert resumed["resumed"] and resumed["start_step"] >= saved
    assert _steps(events) == list(range(1, events[-1]["step"] + 1)) and events[-1]["status"] == "stopped"
