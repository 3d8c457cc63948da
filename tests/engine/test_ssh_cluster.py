"""A MultiWorkerMirrored cluster whose workers ``train`` starts over ssh (tests/ssh_host.py: Debian's
sshd in a network namespace, a user of its own): the chief here, worker 1 there; the run
completes with every step once and both workers' replicas; the remote worker killed on its host
ends the run naming it and the host; a host that refuses fails at the start with one line."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
from cluster_helpers import Launched, alive
from ssh_host import ALIAS, ALIAS2, CLIENT_IP, HOST_IP, USER, USER2

from gui_app.core.cluster_addresses import free_ports
from gui_app.core.ssh_hosts import Host, add_host
from gui_app.engine.cluster.processes import WorkerProcess
from gui_app.identity import app_command

WORKER_PORT = 23456  # worker 1's gRPC port, in the host's own network namespace


def cluster_config(folder: Path, *aliases: str, epochs: int = 1, **strategy) -> Path:
    chief = f"{CLIENT_IP}:{free_ports(1, CLIENT_IP)[0]}"  # this machine, as the hosts reach it
    data = {"dataset": {"name": "digits"}, "model": {"name": "mlp"},
            "strategy": {"name": "multi_worker_mirrored", "join_timeout_s": 60, **strategy,
                         "cluster": [chief, *({"host": alias, "port": WORKER_PORT} for alias in aliases)]},
            "training": {"epochs": epochs, "global_batch_size": 32 * (1 + len(aliases)), "seed": 4,
                         "steps_per_call": 5}}
    path = folder / "ssh-cluster.json"
    path.write_text(json.dumps(data))
    return path


def launch(ssh_host, tmp_path: Path, config: Path, aliases: tuple[str, ...] = (ALIAS,), on_event=None) -> Launched:
    for alias in aliases:
        add_host(Host(alias, command=ssh_host.command), tmp_path / "config" / "hosts.json")
    return Launched("train", str(config), "--runs-dir", str(tmp_path / "runs"), on_event=on_event,
                    env=ssh_host.env(tmp_path / "config"))


def remote_workers(user: str = USER) -> list[int]:
    """The worker processes of a host's user (the app there runs as ``python -m gui_app``)."""
    out = subprocess.run(["ps", "-u", user, "-o", "pid=,args="], capture_output=True, text=True).stdout
    return [int(line.split()[0]) for line in out.splitlines() if "-m gui_app worker" in line]


@pytest.mark.slow
def test_a_cluster_with_a_worker_over_ssh_completes(ssh_host, tmp_path):
    run = launch(ssh_host, tmp_path, cluster_config(tmp_path, ALIAS))
    assert run.wait() == 0, run.stderr[-3000:]
    started = run.of("run_started")[0]
    assert started["num_workers"] == 2
    assert [r["device"].split("/device:")[0] for r in started["replicas"]] == [
        "/job:worker/replica:0/task:0", "/job:worker/replica:0/task:1"]
    steps = run.of("step")
    assert [e["step"] for e in steps] == list(range(1, started["total_steps"] + 1))
    assert all(sorted({r.get("worker", 0) for r in e["replicas"]}) == [0, 1] for e in steps)
    assert run.events[-1]["type"] == "run_finished" and run.events[-1]["status"] == "completed"
    digests = run.digests()  # worker 1's stderr came back over ssh: it ended with the chief's weights
    assert set(digests) == {"worker 0", "worker 1"} and digests["worker 0"] == digests["worker 1"]
    assert not remote_workers()


@pytest.mark.slow
def test_a_cluster_over_two_ssh_hosts_completes(ssh_host, second_ssh_host, tmp_path):
    """The chief here, worker 1 and worker 2 on two hosts (namespaces) that reach each other."""
    run = launch(ssh_host, tmp_path, cluster_config(tmp_path, ALIAS, ALIAS2), (ALIAS, ALIAS2))
    assert run.wait() == 0, run.stderr[-3000:]
    started = run.of("run_started")[0]
    assert started["num_workers"] == 3
    steps = run.of("step")
    assert [e["step"] for e in steps] == list(range(1, started["total_steps"] + 1))
    assert all(sorted({r.get("worker", 0) for r in e["replicas"]}) == [0, 1, 2] for e in steps)
    digests = run.digests()
    assert set(digests) == {"worker 0", "worker 1", "worker 2"} and len(set(digests.values())) == 1
    assert not remote_workers(USER) and not remote_workers(USER2)


@pytest.mark.slow
def test_the_remote_worker_killed_on_its_host_ends_the_run_naming_it(ssh_host, tmp_path):
    state = {}

    def kill_there(launched, event):
        if event["type"] == "step" and event["step"] >= 10 and "at" not in state:
            (pid,) = remote_workers()
            state["at"] = time.monotonic()
            os.kill(pid, signal.SIGKILL)

    run = launch(ssh_host, tmp_path, cluster_config(tmp_path, ALIAS, epochs=20), on_event=kill_there)
    assert run.wait() == 1, run.stderr[-3000:]
    assert time.monotonic() - state["at"] < 20
    message = run.events[-1]["message"]
    assert run.events[-1]["status"] == "failed"
    assert message.startswith(f"worker 1 on {ALIAS} ({HOST_IP}:{WORKER_PORT}) was killed by SIGKILL at step "), message
    assert not any(alive(p) for p in run.worker_pids) and not remote_workers()


@pytest.mark.slow
def test_a_dropped_connection_ends_the_worker_there_and_max_restarts_starts_the_cluster_again(ssh_host, tmp_path):
    state = {}

    def drop(launched, event):  # the ssh client of worker 1 killed: its connection's end
        if event["type"] == "step" and event["step"] >= 10 and "dropped" not in state:
            (client,) = [p for p in launched.worker_pids if "ssh" in Path(f"/proc/{p}/comm").read_text()]
            state["dropped"], state["there"] = client, remote_workers()
            os.kill(client, signal.SIGKILL)

    run = launch(ssh_host, tmp_path, cluster_config(tmp_path, ALIAS, epochs=2, max_restarts=1), on_event=drop)
    assert run.wait() == 0, run.stderr[-3000:]
    (warning,) = [w for w in run.of("warning") if w.get("restart")]
    assert warning["message"].startswith(f"worker 1 on {ALIAS} ({HOST_IP}:{WORKER_PORT}) was killed by SIGKILL")
    assert not any(alive(p) for p in state["there"])  # the worker there died with its connection
    steps = [e["step"] for e in run.of("step")]
    assert steps[-1] == run.of("run_started")[-1]["total_steps"]
    assert run.events[-1]["status"] == "completed"


@pytest.mark.slow
def test_a_dataset_missing_on_a_host_fails_the_run_as_bad_input_without_restarts(ssh_host, tmp_path):
    """The dataset path is a path on every host: here it is readable, there (another user) not."""
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "data.npz", x_train=rng.integers(0, 255, (256, 8, 8, 1), dtype=np.uint8),
             y_train=np.arange(256) % 4, x_test=rng.integers(0, 255, (16, 8, 8, 1), dtype=np.uint8),
             y_test=np.arange(16) % 4)
    config = cluster_config(tmp_path, ALIAS, max_restarts=2)
    data = json.loads(config.read_text())
    config.write_text(json.dumps({**data, "dataset": {"name": "npz", "path": str(tmp_path / "data.npz")}}))
    assert ssh_host.as_user("test", "-r", str(tmp_path / "data.npz")).returncode == 1
    run = launch(ssh_host, tmp_path, config)
    assert run.wait() == 2, run.stderr[-3000:]
    message = run.events[-1]["message"]
    assert message == (f"worker 1 on {ALIAS} ({HOST_IP}:{WORKER_PORT}) exited with code 2 at step 0: "
                       f"{tmp_path / 'data.npz'}: Permission denied")
    assert not [w for w in run.of("warning") if w.get("restart")]


def test_a_host_that_refuses_fails_at_the_start_in_one_line(ssh_host, tmp_path):
    key = tmp_path / "not-authorized"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True, timeout=30)
    alias = ssh_host.own_alias("rs-cluster-no-key", IdentityFile=str(key))
    add_host(Host(alias, command=ssh_host.command), tmp_path / "config" / "hosts.json")
    command = app_command("train", str(cluster_config(tmp_path, alias)), "--runs-dir", str(tmp_path / "runs"),
                          "--events", "jsonl")
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, env=ssh_host.env(tmp_path / "config"),
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 2, done.stderr[-3000:]
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"replica-studio train: {alias}: ssh asks for a password or a key it does not have "), line
    assert line.endswith(f"set up key login once with: ssh-copy-id {alias}"), line
    assert [e["type"] for e in map(json.loads, done.stdout.splitlines())][-2:] == ["error", "run_finished"]


@pytest.mark.parametrize("code, host, how, killed", [
    (255, "gpu2", "lost its ssh connection (ssh exit 255)", True),
    (137, "gpu2", "was killed by SIGKILL", True),  # the shell there: 128 + the signal
    (2, "gpu2", "exited with code 2", False),
    (137, None, "exited with code 137", False),  # a local worker's code is its own
])
def test_how_a_worker_over_ssh_ended_is_told_with_its_host(code, host, how, killed):
    proc = subprocess.Popen(["sh", "-c", f"exit {code}"])
    proc.wait()
    worker = WorkerProcess(1, "10.0.0.2:2222", proc, host=host)
    assert (worker.how_it_ended(), worker.killed) == (how, killed)
    assert worker.where == ("on gpu2 (10.0.0.2:2222)" if host else "at 10.0.0.2:2222")
