"""A sweep whose trials run here and on a real SSH host (tests/ssh_host.py): ``"hosts":
["local", HOST]`` places each trial where the fewest run, the host's trial runs there with
``train --host`` and is followed through its output here (docs/sweeps.md)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from ssh_host import ALIAS

from gui_app.core import rundir
from gui_app.core.ssh_hosts import Host, add_host

pytestmark = pytest.mark.slow

BASE = {"dataset": {"name": "digits"}, "model": {"name": "mlp"}, "strategy": {"name": "default"},
        "training": {"epochs": 2, "global_batch_size": 64, "optimizer": "adam", "seed": 1}}


def test_trials_run_here_and_on_an_ssh_host_and_both_are_told(ssh_host, tmp_path):
    config_dir = tmp_path / "config"
    add_host(Host(ALIAS, command=ssh_host.command, runs_dir=f"~/sweep-{tmp_path.name}"), config_dir / "hosts.json")
    sweep_file = tmp_path / "lr.json"
    sweep_file.write_text(json.dumps({
        "base": BASE, "parameters": {"training.learning_rate": {"choice": [0.001, 0.003]}}, "method": "grid",
        "pruner": "median", "trials": 2, "parallel": 2, "hosts": ["local", ALIAS]}))
    done = ssh_host.cli(config_dir, "sweep", str(sweep_file), "--sweeps-dir", str(tmp_path / "sweeps"), timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    sweep_dir = lines[0]
    assert lines[-1].startswith("sweep completed: 2 trials (2 completed"), lines
    assert any(line.startswith(f"trial 1 started on {ALIAS}:") for line in lines), lines
    status = json.loads(ssh_host.cli(config_dir, "sweep", "status", sweep_dir, "--json").stdout)
    here, there = status["trials"]
    assert here["host"] is None and Path(here["run_dir"]).parent == Path(sweep_dir, "runs")
    assert there["host"] == ALIAS and Path(there["run_dir"]).parent == ssh_host.home / f"sweep-{tmp_path.name}"
    for trial in status["trials"]:
        assert trial["state"] == "completed" and trial["epochs"] == 2 and trial["metric"] > 0.5, trial
        info = rundir.read_run(trial["run_dir"])  # (the host's home is on this machine's disk)
        assert info.status == "completed" and info.config.training.learning_rate == pytest.approx(
            trial["parameters"]["training.learning_rate"])
    # The host's trial was followed through its output here: the same epochs its run directory holds.
    told = [json.loads(line) for line in Path(sweep_dir, "trials", "1.jsonl").read_text().splitlines()]
    on_disk = [e.val_accuracy for e in rundir.read_raw_events(there["run_dir"]) if e.TYPE == "epoch_end"]
    assert [e["val_accuracy"] for e in told if e["type"] == "epoch_end"] == on_disk

