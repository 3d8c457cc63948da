"""Detached runs on a real SSH host (tests/ssh_host.py): ``train --detach --host`` prints the run
directory there, ``attach --host`` streams it, a dropped connection ends only the attachment
(the run goes on), ``stop --host`` and ``runs --host`` (docs/detached.md)."""
from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest
from engine_helpers import LineReader, until
from ssh_host import ALIAS, USER

from gui_app.core.ssh_hosts import Host, add_host
from gui_app.identity import app_command

MLP = {"dataset": {"name": "digits"}, "model": {"name": "mlp"}}
SHORT = {**MLP, "training": {"epochs": 2, "global_batch_size": 64, "seed": 1, "steps_per_call": 1}}
LONG = {**MLP, "training": {"epochs": 200, "global_batch_size": 32, "seed": 1, "steps_per_call": 1}}


@pytest.fixture
def host_config(ssh_host, tmp_path) -> Path:
    """A hosts file whose entry has a runs folder of this test's own there."""
    folder = tmp_path / "config"
    add_host(Host(ALIAS, command=ssh_host.command, runs_dir=f"~/detach-{tmp_path.name}"), folder / "hosts.json")
    return folder


def _detach_there(ssh_host, host_config: Path, tmp_path: Path, config: dict) -> Path:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    done = ssh_host.cli(host_config, "train", str(path), "--host", ALIAS, "--detach", timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    (line,) = done.stdout.splitlines()
    run_dir = Path(line)
    assert run_dir.parent == ssh_host.home / f"detach-{tmp_path.name}"  # the host's run directory
    return run_dir


def _attach_there(ssh_host, host_config: Path, run_dir: Path) -> tuple[subprocess.Popen, LineReader]:
    proc = subprocess.Popen(app_command("attach", str(run_dir), "--host", ALIAS), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ssh_host.env(host_config))
    return proc, LineReader(proc.stdout)


def _until_event(reader: LineReader, seen: list[dict], test) -> dict:
    for event in reader.events(timeout=120):
        seen.append(event)
        if test(event):
            return event
    raise AssertionError(f"the stream ended before the event; last: {seen[-1:]}")


def _runs_there(ssh_host, host_config: Path) -> list[dict]:
    done = ssh_host.cli(host_config, "runs", "--json", "--host", ALIAS, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def _processes_there(word: str) -> list[int]:
    """The host user's processes whose command line holds ``word``."""
    listed = subprocess.run(["ps", "-u", USER, "-o", "pid=,args="], capture_output=True, text=True).stdout
    return [int(line.split()[0]) for line in listed.splitlines() if word in line.split(None, 1)[1]]


def _children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found



def _steps(events: list[dict]) -> list[int]:
    return [e["step"] for e in events if e["type"] == "step"]


@pytest.mark.slow
def test_detach_there_and_attach_from_here_to_the_end(ssh_host, host_config, tmp_path):
    run_dir = _detach_there(ssh_host, host_config, tmp_path, SHORT)
    proc, reader = _attach_there(ssh_host, host_config, run_dir)
    seen = list(reader.events(timeout=180))
    proc.stdin.close()
    assert proc.wait(timeout=60) == 0, proc.stderr.read()[-2000:]
    assert seen[0]["type"] == "run_started" and seen[-1]["status"] == "completed"
    assert _steps(seen) == list(range(1, seen[0]["total_steps"] + 1))
    (listed,) = _runs_there(ssh_host, host_config)
    assert (listed["status"], listed["run_dir"], listed["pid"]) == ("completed", str(run_dir), None)


@pytest.mark.slow
def test_a_dropped_connection_ends_the_attachment_only(ssh_host, host_config, tmp_path):
    """The ssh client of an attachment is killed: the run there goes on (paused, it waits for the
    next attachment), the attach there ends, and a second attachment continues it to the end."""
    run_dir = _detach_there(ssh_host, host_config, tmp_path, {**SHORT, "training": {**SHORT["training"], "epochs": 4}})
    first, reader = _attach_there(ssh_host, host_config, run_dir)
    _until_event(reader, [], lambda e: e["type"] == "step" and e["step"] >= 3)
    first.stdin.write("pause\n")
    first.stdin.flush()
    paused = _until_event(reader, [], lambda e: e["type"] == "paused")
    assert _processes_there(" attach ")
    (ssh,) = [pid for pid in _children(first.pid) if Path(f"/proc/{pid}/exe").resolve().name == "ssh"]
    subprocess.run(["kill", "-9", str(ssh)], check=True)
    assert first.wait(timeout=60) != 0  # its connection is gone
    until(lambda: not _processes_there(" attach "), 60, "the attach there ended")
    (listed,) = _runs_there(ssh_host, host_config)
    assert listed["status"] == "running" and listed["pid"] is not None
    second, reader = _attach_there(ssh_host, host_config, run_dir)
    seen: list[dict] = []
    _until_event(reader, seen, lambda e: e["type"] == "paused")
    second.stdin.write("continue\n")
    second.stdin.flush()
    seen += list(reader.events(timeout=180))
    assert second.wait(timeout=60) == 0, second.stderr.read()[-2000:]
    assert seen[-1]["status"] == "completed" and paused["step"] < seen[-1]["step"]
    assert _steps(seen) == list(range(1, seen[0]["total_steps"] + 1))  # every step once


@pytest.mark.slow
def test_stop_and_runs_there(ssh_host, host_config, tmp_path):
    run_dir = _detach_there(ssh_host, host_config, tmp_path, LONG)
    attached, reader = _attach_there(ssh_host, host_config, run_dir)
    _until_event(reader, [], lambda e: e["type"] == "step")
    attached.send_signal(signal.SIGINT)  # Ctrl+C here ends the attachment, not the run
    assert attached.wait(timeout=60) == 0, attached.stderr.read()[-2000:]
    (listed,) = _runs_there(ssh_host, host_config)
    assert (listed["status"], listed["run_dir"], listed["detached"]) == ("running", str(run_dir), True)
    assert listed["total_steps"] > 1000
    done = ssh_host.cli(host_config, "runs", "--host", ALIAS, timeout=120)
    (header, row) = done.stdout.splitlines()
    assert header.split() == ["STATUS", "STEP", "PROCESS", "RUN"] and row.startswith("running ")
    assert row.endswith(str(run_dir))
    stopped = ssh_host.cli(host_config, "stop", str(run_dir), "--host", ALIAS, timeout=180)
    assert stopped.returncode == 0, stopped.stderr[-2000:]
    assert stopped.stdout.startswith(f"{run_dir}: stopped at step ")
    step = int(stopped.stdout.split()[-1])
    assert (run_dir / "checkpoints" / f"ckpt-{step}.index").is_file()
    (listed,) = _runs_there(ssh_host, host_config)
    assert (listed["status"], listed["step"], listed["pid"]) == ("stopped", step, None)
