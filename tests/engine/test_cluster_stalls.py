"""A local 2-worker cluster's stalls and stragglers, with real faults: a worker frozen with SIGSTOP
is named in a ``stall`` event as stopped within seconds and, continued with SIGCONT, the stall
clears and the run completes; a worker given a fifth of a CPU (a cgroup v1 quota) is named as
the straggler by ``diagnose``, its pass the cause."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from cluster_helpers import Launched
from test_cluster import mw_config

from gui_app.core import rundir
from gui_app.core.diagnosis import diagnose
from gui_app.identity import app_command, app_env

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(sys.platform != "linux", reason="reads /proc, sends SIGSTOP, uses cgroups")]


def test_a_frozen_worker_is_named_stopped_and_the_run_completes_after_sigcont(tmp_path):
    config = mw_config(tmp_path, epochs=12)
    seen: dict = {}

    def hook(launched, event):
        if event["type"] == "step" and event["step"] >= 30 and "frozen" not in seen:
            seen["pid"] = sorted(launched.worker_pids)[1]  # started in index order: worker 1
            seen["step"], seen["frozen"] = event["step"], time.monotonic()
            os.kill(seen["pid"], signal.SIGSTOP)
        elif event["type"] == "stall" and "stall" not in seen:
            seen["stall"], seen["after"] = event, time.monotonic() - seen["frozen"]
            os.kill(seen["pid"], signal.SIGCONT)
        elif event["type"] == "stall_cleared":
            seen["cleared"] = event

    run = Launched("train", str(config), "--runs-dir", str(tmp_path / "runs"), on_event=hook)
    code = run.wait()
    assert code == 0, run.stderr[-3000:]
    stall = seen["stall"]
    print(f"stall event {seen['after']:.1f} s after the freeze")
    assert seen["after"] < 6  # before TensorFlow's heartbeat check ends the cluster (8-11 s)
    assert stall["worker"] == 1 and stall["since_step"] >= seen["step"]
    workers = {w["worker"]: w for w in stall["workers"]}
    assert workers[1]["state"] == "stopped" and workers[1]["os_state"] == "T (stopped)"
    assert workers[1]["pid"] == seen["pid"]
    # Worker 0 waits for it in a collective: the step group's all-reduce, or the agreement on
    # stop and pause between two groups (engine/cluster/agreement.py), and its stack says which.
    assert workers[0]["state"] == "running" and workers[0]["phase"] in ("training", "agreeing")
    where = {"training": "loop.py", "agreeing": "agreement.py"}[workers[0]["phase"]]
    assert any(where in line for line in workers[0]["stack"]), workers[0]["stack"]
    cleared = seen["cleared"]
    assert cleared["step"] > stall["since_step"] and cleared["seconds"] >= 2
    error = [e for e in run.events if e["type"] == "error"]
    assert error == []  # a stall that clears does not fail the run
    assert run.events[-1]["type"] == "run_finished" and run.events[-1]["status"] == "completed"
    run_dir = rundir.list_runs(tmp_path / "runs")[0].path
    kinds = [e.TYPE for e in rundir.read_raw_events(run_dir)]
    assert kinds.index("stall") < kinds.index("stall_cleared")
    done = subprocess.run(app_command("diagnose", str(run_dir), "--json"), capture_output=True, text=True,
                          timeout=60, env=app_env())
    assert [f["kind"] for f in json.loads(done.stdout)["findings"]] == []  # it cleared: nothing to say now


def test_a_worker_left_frozen_fails_the_run_with_the_stall_in_its_error(tmp_path):
    """TensorFlow's heartbeat check ends the cluster 8-11 s after the freeze: the error says the stall."""
    config = mw_config(tmp_path, epochs=12)
    seen: dict = {}

    def hook(launched, event):
        if event["type"] == "step" and event["step"] >= 30 and "pid" not in seen:
            seen["pid"] = sorted(launched.worker_pids)[1]
            os.kill(seen["pid"], signal.SIGSTOP)

    run = Launched("train", str(config), "--runs-dir", str(tmp_path / "runs"), on_event=hook)
    assert run.wait() == 1
    (stall,) = run.of("stall")
    assert stall["worker"] == 1 and run.of("stall_cleared") == []
    finished = run.events[-1]
    assert finished["type"] == "run_finished" and finished["status"] == "failed"
    assert "worker 1" in finished["message"] and "; before it: no step has finished for" in finished["message"]
    assert "holds the others up: its process is stopped" in finished["message"]
    run_dir = rundir.list_runs(tmp_path / "runs")[0].path
    (found,) = [f for f in diagnose(run_dir).findings if f.kind == "stall"]  # the failed run says it too
    assert found.worker == 1 and found.state == "stopped"


CPU_CGROUPS = Path("/sys/fs/cgroup/cpu")  # cgroup v1's cpu controller


def _cgroup_quota_works() -> bool:
    return (CPU_CGROUPS / "cgroup.procs").is_file() and os.access(CPU_CGROUPS, os.W_OK)


def synthetic_npz(path: Path, n: int = 3000) -> Path:
    """28x28 images of noise: a pass of tens of ms per step, so compute is most of a step here."""
    rng = np.random.default_rng(0)
    x = rng.integers(0, 255, (n, 28, 28, 1), dtype=np.uint8)
    y = rng.integers(0, 10, n).astype(np.int64)
    np.savez(path, x_train=x, y_train=y, x_test=x[:200], y_test=y[:200])
    return path


@pytest.mark.skipif(not _cgroup_quota_works(), reason="needs a writable cgroup v1 cpu controller (root)")
def test_a_worker_given_a_fifth_of_a_cpu_is_the_straggler(tmp_path):
    """A CPU quota, not a hog beside it: the scheduler favours a process that wakes from the
    network over a busy loop, so a pinned hog barely slowed a worker's pass here."""
    config = mw_config(tmp_path, epochs=2)
    data = json.loads(config.read_text())
    data["dataset"] = {"name": "npz", "path": str(synthetic_npz(tmp_path / "noise.npz")), "validation": "none"}
    data["model"] = {"name": "mnist_cnn"}
    data["training"]["global_batch_size"] = 128
    config.write_text(json.dumps(data))
    group = CPU_CGROUPS / f"replica-studio-test-{os.getpid()}"
    seen: dict = {}

    def hook(launched, event):
        if event["type"] == "step" and event["step"] >= 3 and "slowed" not in seen:
            group.mkdir()
            (group / "cpu.cfs_period_us").write_text("10000")
            (group / "cpu.cfs_quota_us").write_text("2000")  # 2 ms of every 10: a fifth of a CPU
            (group / "cgroup.procs").write_text(str(sorted(launched.worker_pids)[1]))
            seen["slowed"], seen["at"] = event["step"], time.monotonic()
        elif event["type"] == "step" and "slowed" in seen and "finding_at" not in seen:
            run_dir = rundir.list_runs(tmp_path / "runs")[0].path
            if any(f.kind == "straggler" for f in diagnose(run_dir).findings):
                seen["finding_at"] = time.monotonic() - seen["at"]

    run = Launched("train", str(config), "--runs-dir", str(tmp_path / "runs"), on_event=hook)
    try:
        code = run.wait()
    finally:
        if group.exists():
            group.rmdir()  # its process has ended: the group is empty
    assert code == 0, run.stderr[-3000:]
    run_dir = rundir.list_runs(tmp_path / "runs")[0].path
    done = subprocess.run(app_command("diagnose", str(run_dir), "--json"), capture_output=True, text=True,
                          timeout=60, env=app_env())
    found = [f for f in json.loads(done.stdout)["findings"] if f["kind"] == "straggler"]
    assert found, done.stdout
    (straggler,) = found
    assert straggler["worker"] == 1 and straggler["replica"] == 1 and straggler["cause"] == "compute"
    assert straggler["late_ms"] > 5 and straggler["share"] >= 0.1
    print(f"straggler named {seen.get('finding_at', float('nan')):.1f} s after the quota: {straggler['message']}")
