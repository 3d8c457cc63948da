"""A 2-worker MultiWorkerMirrored cluster with worker 1 on an SSH host (Debian's sshd in a network
namespace, tests/ssh_host.py) against the local 2-worker cluster, same config, interleaved
local/ssh, medians: the start-up (launch to ``run_started`` and to the first step) and the
steady steps/s. Needs root (a namespace, a user, sshd), like the tests.

    PYTHONPATH=. python benchmarks/bench_ssh_cluster.py --repeats 3
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from bench_cluster import run_config
from ssh_host import ALIAS, CLIENT_IP, running_host

from gui_app.core.cluster_addresses import free_ports
from gui_app.core.ssh_hosts import Host, add_host

KEYS = ("run_started_s", "first_step_s", "steps_per_s", "wall_s")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--model", default="mnist_cnn")
    args = parser.parse_args()
    base = {"dataset": {"name": "digits"}, "model": {"name": args.model},
            "training": {"epochs": args.epochs, "global_batch_size": args.batch, "seed": 1, "steps_per_call": 10}}
    results: dict[str, list[dict]] = {"local": [], "ssh": []}
    with running_host() as host, tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        add_host(Host(ALIAS, command=host.command), folder / "config" / "hosts.json")
        env = host.env(folder / "config")
        for _ in range(args.repeats):
            local = {**base, "strategy": {"name": "multi_worker_mirrored", "workers": 2}}
            over_ssh = {**base, "strategy": {"name": "multi_worker_mirrored", "cluster": [
                f"{CLIENT_IP}:{free_ports(1, CLIENT_IP)[0]}", {"host": ALIAS, "port": 23456}]}}
            for name, config in (("local", local), ("ssh", over_ssh)):
                result = run_config(config, folder, name, env)
                print(json.dumps({"cluster": name, **result}), flush=True)
                results[name].append(result)
    for name, runs in results.items():
        medians = {k: statistics.median(r[k] for r in runs) for k in KEYS}
        print(f"{name}: median " + ", ".join(f"{k} {v:.2f}" for k, v in medians.items()))


if __name__ == "__main__":
    main()
