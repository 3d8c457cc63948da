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

import pytest
from cluster_helpers import WAITING_PHASES, Launched
from cpu_quota import FifthOfACpu, cgroup_quota_works, compute_bound, diagnosed_straggler, synthetic_npz
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
    assert workers[0]["state"] == "running" and workers[0]["phase"] in WAITING_PHASES
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


@pytest.mark.skipif(not cgroup_quota_works(), reason="needs a writable cgroup v1 cpu controller (root)")
def test_a_worker_given_a_fifth_of_a_cpu_is_the_straggler(tmp_path):
    config = compute_bound(mw_config(tmp_path, epochs=2), synthetic_npz(tmp_path / "noise.npz"))
    quota = FifthOfACpu(tmp_path / "runs", lambda launched: sorted(launched.worker_pids)[1])
    run = Launched("train", str(config), "--runs-dir", str(tmp_path / "runs"), on_event=quota.hook)
    try:
        code = run.wait()
    finally:
        quota.remove()
    assert code == 0, run.stderr[-3000:]
    straggler = diagnosed_straggler(tmp_path / "runs", app_env())
    assert straggler["worker"] == 1 and straggler["replica"] == 1 and straggler["cause"] == "compute"
    assert straggler["late_ms"] > 5 and straggler["share"] >= 0.1
    print(f"straggler named {quota.finding_after} s after the quota: {straggler['message']}")
