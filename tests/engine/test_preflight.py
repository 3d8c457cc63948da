"""``replica-studio preflight`` and the checks ``train`` of a cluster runs: real processes.

Each refusal is one line naming the worker, where it is and what to do, exit 2, and no run
directory; a good local cluster passes with the all-reduce canary's figures (TensorFlow's
collectives between two worker processes on 127.0.0.1).
"""
from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from engine_helpers import run_cli

from gui_app.core.cluster_addresses import free_ports


def _config(tmp_path: Path, strategy: dict, **sections) -> str:
    data = {"dataset": {"name": "digits"}, "model": {"name": "mlp"}, "strategy": strategy,
            "training": {"epochs": 1, "global_batch_size": 32}, **sections}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return str(path)


def _refused(result, line: str) -> None:
    assert result.returncode == 2, result.stderr
    lines = [x for x in result.stderr.splitlines() if x.strip()]
    assert any(line in x for x in lines), lines


def _no_run_directory(runs: Path) -> None:
    assert not runs.exists() or not any(p.is_dir() for p in runs.iterdir())


@pytest.fixture
def taken_port():
    """A port held by a program that is not a worker (this test's listening socket)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("0.0.0.0", 0))
    s.listen()
    yield s.getsockname()[1]
    s.close()


@pytest.mark.slow
def test_a_good_local_cluster_passes_with_the_canary(tmp_path):
    runs = tmp_path / "runs"
    config = _config(tmp_path, {"name": "multi_worker_mirrored", "workers": 2})
    done = run_cli("preflight", config, "--json", "--runs-dir", str(runs), timeout=280)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["ok"] is True
    assert [w["index"] for w in report["workers"]] == [0, 1]
    chief = report["workers"][0]["facts"]["versions"]
    assert all(w["facts"]["versions"] == chief for w in report["workers"])
    assert chief["tensorflow"] and chief["keras"]
    canary = report["allreduce"]
    assert canary["ran"] and canary["same_sum"] and canary["workers"] == 2 and canary["replicas"] == 2
    assert canary["bytes"] == 4 * 2**20 and canary["rounds"] == 5
    assert 0 < canary["seconds_median"] < 30 and canary["bandwidth_per_worker_mib_s"] > 0
    print(f"\ncanary: {canary['seconds_median'] * 1000:.1f} ms median for 4 MiB over 2 workers, "
          f"{canary['bandwidth_per_worker_mib_s']:.0f} MiB/s per worker, whole preflight {canary['wall_s']:.1f} s")
    _no_run_directory(runs)
    text = run_cli("preflight", config, "--runs-dir", str(runs), "--no-canary")
    assert text.returncode == 0 and text.stdout.rstrip().endswith("ok"), text.stdout


def test_a_port_taken_by_another_program_is_refused(tmp_path, taken_port):
    runs = tmp_path / "runs"
    other = free_ports(1)[0]
    config = _config(tmp_path, {"name": "multi_worker_mirrored", "cluster": [f"127.0.0.1:{taken_port}",
                                                                             f"127.0.0.1:{other}"]})
    line = f"worker 0 (chief) at 127.0.0.1:{taken_port}: port {taken_port} on 127.0.0.1 is taken by another program"
    done = run_cli("preflight", config, "--json", "--runs-dir", str(runs))
    _refused(done, line)
    report = json.loads(done.stdout)
    assert report["ok"] is False and report["allreduce"]["ran"] is False and len(report["problems"]) == 1
    train = run_cli("train", config, "--runs-dir", str(runs), "--events", "none")
    _refused(train, line)
    _no_run_directory(runs)


def test_an_unreachable_address_is_refused(tmp_path):
    # A link-local address without its interface: the kernel refuses the connect at once, and
    # no packet leaves this machine (the tests use no network).
    runs = tmp_path / "runs"
    chief = free_ports(1)[0]
    config = _config(tmp_path, {"name": "multi_worker_mirrored", "cluster": [f"127.0.0.1:{chief}",
                                                                             "[fe80::1]:2222"]})
    line = "worker 1 at [fe80::1]:2222 is unreachable from worker 0 on 127.0.0.1 (Invalid argument)"
    _refused(run_cli("preflight", config, "--runs-dir", str(runs)), line)
    _refused(run_cli("train", config, "--runs-dir", str(runs), "--events", "none"), line)
    _no_run_directory(runs)


def test_a_missing_dataset_path_is_refused(tmp_path):
    runs = tmp_path / "runs"
    missing = tmp_path / "nowhere" / "data.npz"
    config = _config(tmp_path, {"name": "multi_worker_mirrored", "workers": 2},
                     dataset={"name": "npz", "path": str(missing)})
    line = "worker 0 (chief) at 127.0.0.1:"
    done = run_cli("preflight", config, "--runs-dir", str(runs))
    _refused(done, f"{missing} is missing on 127.0.0.1 (dataset and model paths are each host's)")
    assert line in done.stderr
    _refused(run_cli("train", config, "--runs-dir", str(runs), "--events", "none"), f"{missing} is missing")
    _no_run_directory(runs)


def test_a_runs_folder_that_is_not_writable_is_refused(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    runs = blocker / "runs"  # root may write anywhere; nobody can make a folder inside a file
    config = _config(tmp_path, {"name": "multi_worker_mirrored", "workers": 2})
    _refused(run_cli("preflight", config, "--runs-dir", str(runs)),
             f"cannot write in {runs} on 127.0.0.1 (Not a directory); choose a writable runs folder")
    assert run_cli("train", config, "--runs-dir", str(runs), "--events", "none").returncode == 2
    assert blocker.read_text() == "not a folder"


@pytest.mark.parametrize("content, line", [
    ("not json at all", "replica-studio preflight: config"),
    (json.dumps({"strategy": {"name": "mirrored"}}),
     "replica-studio preflight: strategy.name: preflight checks a multi-worker config "
     "(multi_worker_mirrored or parameter_server); this one is 'mirrored'"),
])
def test_bad_input_is_one_line(tmp_path, content, line):
    path = tmp_path / "config.json"
    path.write_text(content, encoding="utf-8")
    done = run_cli("preflight", str(path))
    assert done.returncode == 2
    lines = [x for x in done.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith(line), lines
    assert done.stdout == ""


def _facts(**versions) -> dict:
    from gui_app.engine.cluster.preflight_checks import versions as ours

    return {"versions": {**ours(), **versions}, "port": None, "peers": {}, "inputs": {},
            "folder": {"folder": "/runs", "problem": None, "free_bytes": 10 * 2**30}, "time": 0.0}


def test_another_tensorflow_a_skewed_clock_and_a_small_disk_are_each_one_line():
    from gui_app.core.config import RunConfig
    from gui_app.engine.cluster.preflight_checks import checkpoint_bytes, problems, versions

    tf = versions()["tensorflow"]
    chief = {"index": 0, "where": "at 10.0.0.1:2222", "host": "10.0.0.1", "address": "10.0.0.1:2222",
             "facts": _facts(), "clock_offset_s": 0.0}
    gpu3 = {"index": 1, "where": "on gpu3 (10.0.0.3:2222)", "host": "gpu3", "address": "10.0.0.3:2222",
            "facts": _facts(tensorflow="2.20.0"), "clock_offset_s": -3.4}
    gpu3["facts"]["folder"]["free_bytes"] = 2**20
    need, how = checkpoint_bytes(RunConfig.from_dict({"model": {"name": "mlp"}}))
    assert need == 832_484 * 4 * 3 * 3 + 2**20  # adam: the weights and 2 slots, 3 kept checkpoints, 1 MiB margin
    assert "832,484 float32 parameters of mlp" in how
    assert problems([chief, gpu3], need) == [
        f"worker 1 on gpu3 (10.0.0.3:2222) has TensorFlow 2.20.0, the chief {tf}: install the chief's version",
        f"worker 1 on gpu3 (10.0.0.3:2222): /runs on gpu3 has 1.0 MiB free but the checkpoints need about "
        f"{need / 2**20:.1f} MiB; free some space",
        "worker 1 on gpu3 (10.0.0.3:2222): its clock is 3.4 s behind this machine's; synchronise it (NTP, chrony)",
    ]
    assert problems([chief], need) == []
