"""Two hosts for real: worker 1 in its own network namespace, on a veth pair with the chief.

Needs root and iproute2 (Linux); skipped with the reason elsewhere. Only the namespace, the
veth pair and the two 10.213.77.0/30 addresses made here are touched, and removed at the end.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
from cluster_helpers import Launched

from gui_app.core.cluster_addresses import free_ports
from gui_app.identity import app_command, app_env

NS, VETH, PEER = "rs-test-h1", "rs-test-v0", "rs-test-v1"
CHIEF_IP, WORKER_IP = "10.213.77.1", "10.213.77.2"


def _ip(*args: str, ns: str | None = None) -> None:
    cmd = ["ip", "netns", "exec", ns, "ip", *args] if ns else ["ip", *args]
    subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=10)


@pytest.fixture
def second_host():
    if sys.platform != "linux" or not shutil.which("ip"):
        pytest.skip("network namespaces need Linux with iproute2")
    try:
        _ip("netns", "add", NS)
    except subprocess.CalledProcessError as exc:
        pytest.skip(f"cannot create a network namespace here ({exc.stderr.strip() or exc}); needs root")
    try:
        _ip("link", "add", VETH, "type", "veth", "peer", "name", PEER)
        _ip("link", "set", PEER, "netns", NS)
        _ip("addr", "add", f"{CHIEF_IP}/30", "dev", VETH)
        _ip("link", "set", VETH, "up")
        _ip("addr", "add", f"{WORKER_IP}/30", "dev", PEER, ns=NS)
        _ip("link", "set", PEER, "up", ns=NS)
        _ip("link", "set", "lo", "up", ns=NS)
        yield NS
    finally:
        subprocess.run(["ip", "link", "del", VETH], capture_output=True, timeout=10)
        subprocess.run(["ip", "netns", "del", NS], capture_output=True, timeout=10)


@pytest.mark.slow
def test_a_cluster_across_two_network_stacks(tmp_path, second_host):
    p0, p1 = free_ports(2)
    data = {"dataset": {"name": "digits"}, "model": {"name": "mlp"},
            "strategy": {"name": "multi_worker_mirrored", "cluster": [f"{CHIEF_IP}:{p0}", f"{WORKER_IP}:{p1}"],
                         "join_timeout_s": 60},
            "training": {"epochs": 1, "global_batch_size": 64, "seed": 4, "steps_per_call": 5}}
    config = tmp_path / "two-hosts.json"
    config.write_text(json.dumps(data))
    other = subprocess.Popen(["ip", "netns", "exec", second_host, *app_command("worker", str(config), "--index", "1")],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                             env=app_env({"TF_CPP_MIN_LOG_LEVEL": "2"}))
    try:
        run = Launched("train", str(config), "--runs-dir", str(tmp_path / "runs"))
        assert run.wait() == 0, run.stderr[-3000:]
        err = other.communicate(timeout=60)[1]
    finally:
        other.kill()
    assert other.returncode == 0, err[-3000:]
    started = run.of("run_started")[0]
    assert [r["device"].split("/device:")[0] for r in started["replicas"]] == [
        "/job:worker/replica:0/task:0", "/job:worker/replica:0/task:1"]
    assert all({r.get("worker", 0) for r in e["replicas"]} == {0, 1} for e in run.of("step"))
    assert run.events[-1]["status"] == "completed"
    chief_digest = run.digests()["worker 0"]
    assert f"weights sha256 {chief_digest}" in err  # worker 1, in the other namespace, ended equal
