"""Stalls and stragglers of a cluster whose worker 1 runs on the SSH test host (tests/ssh_host.py:
Debian's sshd in a network namespace, a user of its own), with real faults sent to that worker's
process there: frozen with SIGSTOP, the chief's ``stall`` event names it ``stopped`` from its
``/proc`` read over ssh (its status reports crossed the veth to the chief's address until the
freeze); continued, the stall clears and the run completes; left frozen, TensorFlow's heartbeat
failure ends the run with the stall in its error; given a fifth of a CPU (a cgroup v1 quota),
``diagnose`` names it the straggler."""
from __future__ import annotations

import os
import signal
import sys
import time

import pytest
from cluster_helpers import WAITING_PHASES
from cpu_quota import FifthOfACpu, cgroup_quota_works, compute_bound, diagnosed_straggler, synthetic_npz
from ssh_host import ALIAS, HOST_IP
from test_ssh_cluster import WORKER_PORT, cluster_config, launch, remote_workers

from gui_app.core import rundir
from gui_app.core.diagnosis import diagnose
from gui_app.core.live_runs import read_workers

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(sys.platform != "linux", reason="sends SIGSTOP, reads /proc, uses cgroups")]


def _freeze_at(step: int, thaw: bool):
    """An on_event hook: SIGSTOP to worker 1's process on the host once the chief told ``step``;
    ``thaw``: SIGCONT once the ``stall`` event came."""
    seen: dict = {}

    def hook(launched, event):
        if event["type"] == "step" and event["step"] >= step and "frozen" not in seen:
            (seen["pid"],) = remote_workers()  # the host's namespace shares this machine's process ids
            seen["step"], seen["frozen"] = event["step"], time.monotonic()
            os.kill(seen["pid"], signal.SIGSTOP)
        elif event["type"] == "stall" and "stall" not in seen:
            seen["stall"], seen["after"] = event, time.monotonic() - seen["frozen"]
            if thaw:
                os.kill(seen["pid"], signal.SIGCONT)
        elif event["type"] == "stall_cleared":
            seen["cleared"] = event

    return hook, seen


def _check_stall(stall: dict, seen: dict) -> None:
    assert stall["worker"] == 1 and stall["since_step"] >= seen["step"]
    assert stall["reason"] == "its process is stopped (T (stopped))"
    workers = {w["worker"]: w for w in stall["workers"]}
    there = workers[1]
    assert there["state"] == "stopped" and there["os_state"] == "T (stopped)"  # its /proc, read over ssh
    assert there["pid"] == seen["pid"] and there["host"] == ALIAS
    assert workers[0]["state"] == "running" and workers[0]["phase"] in WAITING_PHASES


def test_a_worker_frozen_on_its_host_is_named_stopped_and_the_run_completes_after_sigcont(ssh_host, tmp_path):
    hook, seen = _freeze_at(30, thaw=True)
    run = launch(ssh_host, tmp_path, cluster_config(tmp_path, ALIAS, epochs=12), on_event=hook)
    assert run.wait() == 0, run.stderr[-3000:]
    print(f"stall event {seen['after']:.1f} s after the freeze on the host")
    assert seen["after"] < 7  # before TensorFlow's heartbeat check ends the cluster (8-11 s)
    _check_stall(seen["stall"], seen)
    assert seen["cleared"]["step"] > seen["stall"]["since_step"]
    assert run.of("error") == [] and run.events[-1]["status"] == "completed"
    run_dir = rundir.list_runs(tmp_path / "runs")[0].path
    recorded = read_workers(run_dir)  # the launcher's record of where each worker's process runs
    assert recorded[1].pid == seen["pid"] and recorded[1].host == ALIAS
    assert recorded[0].host is None and recorded[0].pid in run.worker_pids
    assert not remote_workers()


def test_a_worker_left_frozen_on_its_host_fails_the_run_with_the_stall_in_its_error(ssh_host, tmp_path):
    """TensorFlow's heartbeat check ends the cluster: its error names the worker there and carries
    the stall's sentence."""
    hook, seen = _freeze_at(30, thaw=False)
    run = launch(ssh_host, tmp_path, cluster_config(tmp_path, ALIAS, epochs=12), on_event=hook)
    assert run.wait() == 1, run.stderr[-3000:]
    (stall,) = run.of("stall")
    _check_stall(stall, seen)
    finished = run.events[-1]
    assert finished["status"] == "failed" and run.of("stall_cleared") == []
    message = finished["message"]
    assert message.startswith(f"worker 1 on {ALIAS} ({HOST_IP}:{WORKER_PORT}) stopped sending heartbeats"), message
    assert "; before it: no step has finished for" in message and "its process is stopped" in message
    run_dir = rundir.list_runs(tmp_path / "runs")[0].path
    (found,) = [f for f in diagnose(run_dir).findings if f.kind == "stall"]
    assert found.worker == 1 and found.state == "stopped"
    assert not remote_workers()  # the frozen process ended with its ssh connection


@pytest.mark.skipif(not cgroup_quota_works(), reason="needs a writable cgroup v1 cpu controller (root)")
@pytest.mark.timeout(600)  # (86 s here in a full slow run; its own limit is the launcher's 400 s below)
def test_a_worker_given_a_fifth_of_a_cpu_on_its_host_is_the_straggler(ssh_host, tmp_path):
    data_file = ssh_host.home / f"noise-{tmp_path.name}.npz"  # a path the host's user can read, and root here
    synthetic_npz(data_file).chmod(0o644)
    config = compute_bound(cluster_config(tmp_path, ALIAS, epochs=2), data_file)
    quota = FifthOfACpu(tmp_path / "runs", lambda launched: remote_workers()[0])
    run = launch(ssh_host, tmp_path, config, on_event=quota.hook)
    try:
        code = run.wait(timeout=400)
    finally:
        quota.remove()
        data_file.unlink()
    assert code == 0, run.stderr[-3000:]
    straggler = diagnosed_straggler(tmp_path / "runs", ssh_host.env(tmp_path / "config"))
    assert straggler["worker"] == 1 and straggler["replica"] == 1 and straggler["cause"] == "compute"
    assert straggler["late_ms"] > 5 and straggler["share"] >= 0.1
    print(f"straggler on the host named {quota.finding_after} s after the quota: {straggler['message']}")
