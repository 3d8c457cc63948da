"""``preflight`` of a cluster over a real SSH host (tests/ssh_host.py: sshd in a network
namespace, its own user): the host's worker is asked there, over ssh, for its versions, its
port, the addresses it reaches, its dataset paths and its clock."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from engine_helpers import run_cli
from ssh_host import ALIAS, CLIENT_IP, HOST_IP

from gui_app.core.cluster_addresses import free_ports
from gui_app.core.ssh_hosts import Host, add_host

PORT = 23456


def _config(folder: Path, dataset: dict | None = None) -> str:
    chief = f"{CLIENT_IP}:{free_ports(1, CLIENT_IP)[0]}"
    data = {"dataset": dataset or {"name": "digits"}, "model": {"name": "mlp"},
            "strategy": {"name": "multi_worker_mirrored", "cluster": [chief, {"host": ALIAS, "port": PORT}]},
            "training": {"epochs": 1, "global_batch_size": 64, "seed": 4}}
    path = folder / "ssh-cluster.json"
    path.write_text(json.dumps(data))
    return str(path)


def _preflight(ssh_host, tmp_path: Path, config: str, command: str | None = None):
    add_host(Host(ALIAS, command=command or ssh_host.command), tmp_path / "config" / "hosts.json")
    return run_cli("preflight", config, "--json", "--runs-dir", str(tmp_path / "runs"),
                   env={k: v for k, v in ssh_host.env(tmp_path / "config").items()}, timeout=240)


@pytest.mark.slow
def test_a_good_ssh_cluster_passes_with_the_host_asked_there_and_the_canary(ssh_host, tmp_path):
    done = _preflight(ssh_host, tmp_path, _config(tmp_path))
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    chief, there = report["workers"]
    assert there["kind"] == "ssh" and there["address"] == f"{HOST_IP}:{PORT}"
    ours, theirs = chief["facts"]["versions"], there["facts"]["versions"]
    same = ("app", "tensorflow", "keras")
    assert {k: theirs[k] for k in same} == {k: ours[k] for k in same}
    assert theirs["python"].split(".")[:2] == ours["python"].split(".")[:2]  # the host's system Python: another patch
    assert there["facts"]["port"] is None  # free there
    assert there["facts"]["peers"] == {chief["address"]: "refused"}  # the chief's machine answers; nothing listens yet
    assert abs(there["clock_offset_s"]) < 2  # the same kernel's clock: only the round trip
    canary = report["allreduce"]
    assert canary["ran"] and canary["same_sum"] and canary["workers"] == 2, canary
    print(f"\nssh canary: {canary['seconds_median'] * 1000:.1f} ms median for 4 MiB over 2 workers (worker 1 on "
          f"the host), {canary['bandwidth_per_worker_mib_s']:.0f} MiB/s per worker, whole preflight "
          f"{canary['wall_s']:.1f} s")


def test_a_host_whose_app_is_another_release_is_refused_in_one_line(ssh_host, tmp_path):
    done = _preflight(ssh_host, tmp_path, _config(tmp_path), ssh_host.old_command)
    assert done.returncode == 2
    (line,) = [x for x in done.stderr.splitlines() if x.strip()]
    assert line.startswith(f"replica-studio preflight: worker 1: {ALIAS}: replica-studio 0.0.1 there "), line
    assert json.loads(done.stdout)["ok"] is False


def test_a_dataset_the_host_cannot_read_is_refused_naming_the_host(ssh_host, tmp_path):
    data = tmp_path / "data.npz"
    rng = np.random.default_rng(0)
    np.savez(data, x_train=rng.integers(0, 255, (64, 8, 8, 1), dtype=np.uint8), y_train=np.arange(64) % 4,
             x_test=rng.integers(0, 255, (16, 8, 8, 1), dtype=np.uint8), y_test=np.arange(16) % 4)
    assert ssh_host.as_user("test", "-r", str(data)).returncode == 1  # readable here, not by the host's user
    done = _preflight(ssh_host, tmp_path, _config(tmp_path, {"name": "npz", "path": str(data)}))
    assert done.returncode == 2
    (line,) = [x for x in done.stderr.splitlines() if x.strip()]
    assert line.startswith(f"replica-studio preflight: worker 1 on {ALIAS} ({HOST_IP}:{PORT}): {data} is "), line
    assert f"on {ALIAS} (dataset and model paths are each host's)" in line
