"""Multi-worker runs as real processes on 127.0.0.1: the launcher, its workers, failures."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from cluster_helpers import Launched, alive

from gui_app.core import rundir
from gui_app.core.cluster_addresses import free_ports
from gui_app.identity import app_command, app_env

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the cluster tests read /proc and use PDEATHSIG")


def mw_config(tmp_path, name="mw.json", workers=2, cpu_devices=1, epochs=2, **strategy):
    data = {"dataset": {"name": "digits"}, "model": {"name": "mlp"},
            "strategy": {"name": "multi_worker_mirrored", "workers": workers, **strategy},
            "training": {"epochs": epochs, "global_batch_size": 64, "seed": 5, "steps_per_call": 5},
            "runtime": {"cpu_devices": cpu_devices}}
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def _kill_worker_at(step: int, index: int = 1, sig=signal.SIGKILL):
    """An on_event hook: send ``sig`` to worker ``index`` once the chief reported ``step``."""
    state = {}

    def hook(launched, event):
        if event["type"] == "step" and event["step"] >= step and "killed" not in state:
            workers = sorted(launched.worker_pids)  # started in index order
            state["killed"] = workers[index]
            state["at"], state["wall"] = time.monotonic(), time.time()
            os.kill(workers[index], sig)

    return hook, state


@pytest.mark.slow
def test_two_workers_two_cpus_each_complete_with_every_replica_reported(tmp_path):
    config = mw_config(tmp_path, cpu_devices=2, epochs=1)
    run = Launched("train", str(config), "--runs-dir", str(tmp_path / "runs"))
    assert run.wait() == 0, run.stderr[-3000:]
    started = run.of("run_started")[0]
    assert started["num_replicas"] == 4 and started["num_workers"] == 2
    assert [(r["worker"], r["device"].split("device:")[-1]) for r in started["replicas"]] == [
        (0, "CPU:0"), (0, "CPU:1"), (1, "CPU:0"), (1, "CPU:1")]
    steps = run.of("step")
    assert [e["step"] for e in steps] == list(range(1, started["total_steps"] + 1))
    for e in steps:
        assert sorted({r.get("worker", 0) for r in e["replicas"]}) == [0, 1]
        assert [r["examples"] for r in e["replicas"]] == [16, 16, 16, 16]
    finished = run.events[-1]
    assert finished["type"] == "run_finished" and finished["status"] == "completed"
    evaluation = run.of("eval")[0]
    assert evaluation["examples"] == 359 and sum(evaluation["examples_per_replica"]) == 359
    assert evaluation["examples_per_sec"] > 0
    digests = run.digests()
    assert set(digests) == {"worker 0", "worker 1"} and digests["worker 0"] == digests["worker 1"]
    run_dir = rundir.list_runs(tmp_path / "runs")[0]
    assert run_dir.status == "completed" and run_dir.has_model
    assert not any(alive(p) for p in run.worker_pids)


@pytest.mark.slow
def test_a_killed_worker_fails_the_run_quickly_and_resume_completes_it(tmp_path):
    config = mw_config(tmp_path, epochs=2)
    hook, state = _kill_worker_at(25)
    run = Launched("train", str(config), "--runs-dir", str(tmp_path / "runs"), on_event=hook)
    code = run.wait()
    ended = time.monotonic()
    assert code == 1
    assert ended - state["at"] < 20
    finished = run.events[-1]
    assert finished["type"] == "run_finished" and finished["status"] == "failed"
    assert "worker 1" in finished["message"] and "SIGKILL" in finished["message"], finished["message"]
    assert not any(alive(p) for p in run.worker_pids)
    run_dir = rundir.list_runs(tmp_path / "runs")[0]
    assert run_dir.resumable

    again = Launched("resume", str(run_dir.path))
    assert again.wait() == 0, again.stderr[-3000:]
    started = again.of("run_started")[0]
    assert started["resumed"] and started["start_step"] >= 20
    assert again.events[-1]["status"] == "completed" and again.events[-1]["step"] == started["total_steps"]
    assert again.digests()["worker 0"] == again.digests()["worker 1"]


@pytest.mark.slow
def test_a_hung_worker_is_named_and_max_restarts_completes_the_run(tmp_path):
    config = mw_config(tmp_path, epochs=2, max_restarts=1)
    hook, state = _kill_worker_at(25, sig=signal.SIGSTOP)  # hung, not dead
    run = Launched("train", str(config), "--runs-dir", str(tmp_path / "runs"), on_event=hook)
    assert run.wait() == 0, run.stderr[-3000:]
    restarts = [w for w in run.of("warning") if w.get("restart")]
    assert len(restarts) == 1, run.of("warning")
    assert "worker 1" in restarts[0]["message"] and "stopped sending heartbeats" in restarts[0]["message"]
    # TensorFlow's heartbeat check names it: 8-11 s after the freeze on a quiet machine, 22 s once
    # with two test sessions beside it (load 5).
    assert restarts[0]["time"] - state["wall"] < 45
    assert not alive(state["killed"])
    steps = [e["step"] for e in run.of("step")]
    total = run.of("run_started")[0]["total_steps"]
    assert set(steps) == set(range(1, total + 1))  # no gap (steps after the checkpoint run twice)
    assert run.events[-1]["status"] == "completed"


def test_a_host_that_never_joins_fails_after_the_join_timeout(tmp_path):
    from gui_app.core.cluster_addresses import free_ports

    a, b = free_ports(2)
    config = mw_config(tmp_path, workers=0, cluster=[f"127.0.0.1:{a}", f"127.0.0.1:{b}"], join_timeout_s=2)
    started = time.monotonic()
    run = Launched("train", str(config), "--runs-dir", str(tmp_path / "runs"))
    assert run.wait(timeout=60) == 1
    assert time.monotonic() - started < 30
    finished = run.events[-1]
    assert finished["status"] == "failed"
    assert f"worker 1 (127.0.0.1:{b}) never joined within 2 s" in finished["message"], finished["message"]


@pytest.mark.slow
def test_parameter_servers_complete_after_a_worker_is_killed(tmp_path):
    data = {"dataset": {"name": "digits"}, "model": {"name": "mlp"},
            "strategy": {"name": "parameter_server", "workers": 2, "ps": 1},
            "training": {"epochs": 4, "global_batch_size": 64, "seed": 5, "steps_per_call": 5}}
    config = tmp_path / "ps.json"
    config.write_text(json.dumps(data))
    state = {}

    def hook(launched, event):
        if event["type"] == "step" and event["step"] >= 10 and "killed" not in state:
            workers = {e["replicas"][0].get("worker", 0) for e in launched.of("step")}
            state["before"] = workers
            # The coordinator's children: ps 0 first, then workers 0 and 1.
            pids = sorted(launched.worker_pids)
            state["killed"] = pids[2]
            os.kill(pids[2], signal.SIGKILL)

    run = Launched("train", str(config), "--runs-dir", str(tmp_path / "runs"), on_event=hook)
    assert run.wait() == 0, run.stderr[-3000:]
    assert state["before"] == {0, 1}  # both workers ran steps before the kill
    warned = [w for w in run.of("warning") if w.get("worker") == 1]
    assert warned and "SIGKILL" in warned[0]["message"]
    total = run.of("run_started")[0]["total_steps"]
    assert [e["step"] for e in run.of("step")] == list(range(1, total + 1))
    late = [e["replicas"][0].get("worker", 0) for e in run.of("step") if e["step"] > warned[0]["step"]]
    assert late and set(late) == {0}  # after the kill, worker 0 ran every step
    assert run.events[-1]["status"] == "completed" and run.of("eval")[0]["examples"] == 359
    assert not any(alive(p) for p in run.worker_pids)


@pytest.mark.slow
def test_parameter_servers_train_a_streamed_set_with_checkpoints_by_steps(tmp_path):
    """The coordinator runs the same controller as every strategy: a streamed set, checkpoints
    every 5 steps, every step told once with the worker that ran it."""
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "core"))
    from stream_files import write_tfrecords

    write_tfrecords(tmp_path / "shards", 300, shards=4)
    data = {"dataset": {"name": "tfrecord", "path": str(tmp_path / "shards"), "image_size": [8, 8],
                        "color_mode": "grayscale", "loading": "stream"},
            "model": {"name": "mlp"}, "strategy": {"name": "parameter_server", "workers": 2, "ps": 1},
            "training": {"epochs": 2, "global_batch_size": 16, "seed": 5, "steps_per_call": 3,
                         "checkpoint_every_steps": 5}}
    config = tmp_path / "ps.json"
    config.write_text(json.dumps(data))
    run = Launched("train", str(config), "--runs-dir", str(tmp_path / "runs"))
    assert run.wait() == 0, run.stderr[-3000:]
    started = run.of("run_started")[0]
    assert started["dataset"]["streamed"] is True
    total = started["total_steps"]
    steps = run.of("step")
    assert [e["step"] for e in steps] == list(range(1, total + 1))
    assert all(e["per_worker"] and e["replicas"][0].get("worker", 0) in (0, 1) for e in steps)
    saved = [e["step"] for e in run.of("checkpoint")]
    assert any(s % started["steps_per_epoch"] for s in saved) and saved[-1] == total  # by steps, and at the end
    assert run.of("eval")[0]["examples"] == started["dataset"]["test_examples"]
    assert not any(alive(p) for p in run.worker_pids)


def test_a_port_that_answers_but_is_no_worker_fails_after_the_join_timeout(tmp_path):
    """Something else listens on worker 1's port (here a bare socket; in some networks a proxy
    accepts every connection): the chief's TensorFlow would wait for it for minutes."""
    import socket

    (a,) = free_ports(1)
    impostor = socket.socket()
    impostor.bind(("127.0.0.1", 0))
    impostor.listen()
    b = impostor.getsockname()[1]
    try:
        config = mw_config(tmp_path, workers=0, cluster=[f"127.0.0.1:{a}", f"127.0.0.1:{b}"], join_timeout_s=4)
        started = time.monotonic()
        run = Launched("train", str(config), "--runs-dir", str(tmp_path / "runs"))
        assert run.wait(timeout=90) == 1
        assert time.monotonic() - started < 60
    finally:
        impostor.close()
    finished = run.events[-1]
    assert finished["status"] == "failed"
    assert "did not form the cluster within strategy.join_timeout_s" in finished["message"], finished["message"]
    assert not any(alive(p) for p in run.worker_pids)


@pytest.mark.slow
@pytest.mark.parametrize("to", ["launcher", "workers"])
def test_sigterm_stops_a_local_cluster_with_a_checkpoint(tmp_path, to):
    """SIGTERM to the launcher (it tells the chief), or to the workers themselves, as Slurm's
    scancel or a container runtime does. A worker's own handler is back after TensorFlow's
    coordination service replaced it (engine/control.reclaim_signals): before, the workers
    ignored SIGTERM and trained on to the end."""
    config = mw_config(tmp_path, epochs=50)
    sent = []

    def hook(launched, event):
        if event["type"] == "step" and event["step"] >= 10 and not sent:
            sent.append(time.time())
            for pid in sorted(launched.worker_pids) if to == "workers" else [launched.proc.pid]:
                os.kill(pid, signal.SIGTERM)

    run = Launched("train", str(config), "--runs-dir", str(tmp_path / "runs"), on_event=hook)
    assert run.wait() == 0, run.stderr[-3000:]
    finished = run.events[-1]
    assert finished["type"] == "run_finished" and finished["status"] == "stopped", run.stderr[-3000:]
    assert finished["message"] == "stopped by SIGTERM"
    assert run.of("checkpoint")[-1]["step"] == finished["step"] < run.of("run_started")[0]["total_steps"]
    assert finished["time"] - sent[0] < 30
    assert not any(alive(p) for p in run.worker_pids)


@pytest.mark.slow
def test_a_worker_of_another_job_is_refused_not_trained_with(tmp_path):
    """Two Slurm jobs' workers on one port (as with the old fixed port 8888): the cluster forms,
    but the run identities differ (engine/cluster/run_identity.py), so both refuse to train."""
    config = mw_config(tmp_path, epochs=1)
    port = free_ports(1)[0]  # and port + 1: SLURM_STEP_TASKS_PER_NODE=2 on one node
    procs = []
    for rank, job in ((0, "101"), (1, "202")):
        env = app_env({"TF_CPP_MIN_LOG_LEVEL": "2", "SLURM_PROCID": str(rank), "SLURM_JOB_ID": job,
                       "SLURM_STEP_ID": "0", "SLURM_STEP_NODELIST": "localhost", "SLURM_STEP_TASKS_PER_NODE": "2",
                       "REPLICA_STUDIO_SLURM_PORT_BASE": str(port)})
        cmd = app_command("worker", str(config), "--cluster", "slurm", "--run-dir", str(tmp_path / "run"),
                          "--continue", "--data-seed", "1", "--events", "jsonl" if rank == 0 else "none")
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outputs = [p.communicate(timeout=240) for p in procs]
    assert [p.returncode for p in procs] == [1, 1], outputs[0][1][-3000:]
    events = [json.loads(line) for line in outputs[0][0].splitlines()]
    assert not [e for e in events if e["type"] in ("run_started", "step")]
    assert events[-1]["status"] == "failed"
    assert "worker(s) 1 of this cluster belong to another run" in events[-1]["message"], events[-1]
    assert "worker(s) 0 of this cluster belong to another run" in outputs[1][1]
