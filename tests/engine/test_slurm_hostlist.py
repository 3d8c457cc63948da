"""The cluster of a Slurm job step from Slurm's variables, in Slurm's order (no Slurm needed)."""
from __future__ import annotations

import json

import pytest

from gui_app.core.config import ConfigError, StrategyConfig
from gui_app.engine.cluster.topology import resolve_task
from gui_app.engine.schedulers.slurm import cluster as slurm


@pytest.mark.parametrize("text, hosts", [
    ("node[9-10]", ["node9", "node10"]),  # as text node10 sorts first: TensorFlow's resolver did that
    ("node10,node9", ["node10", "node9"]),
    ("gpu[01-03,7],cpu5", ["gpu01", "gpu02", "gpu03", "gpu7", "cpu5"]),
    ("rack[1-2]-n[8-9]", ["rack1-n8", "rack1-n9", "rack2-n8", "rack2-n9"]),
    ("login", ["login"]),
])
def test_node_lists_expand_in_slurms_order(text, hosts):
    assert slurm.expand_hostlist(text) == hosts


def test_tasks_per_node_and_ports_per_job():
    assert slurm.tasks_per_node("2(x3),1") == [2, 2, 2, 1]
    env = {"SLURM_STEP_NODELIST": "node[9-10]", "SLURM_STEP_TASKS_PER_NODE": "2(x2)", "SLURM_JOB_ID": "17"}
    port = slurm.PORT_LOW + 17 * slurm.PORTS_PER_JOB
    assert slurm.workers(env) == [f"node9:{port}", f"node9:{port + 1}", f"node10:{port}", f"node10:{port + 1}"]
    other = slurm.workers({**env, "SLURM_JOB_ID": "18"})
    assert not {a.split(":")[1] for a in other} & {str(port), str(port + 1)}  # two jobs, two port blocks
    assert slurm.workers({**env, slurm.PORT_ENV: "9000"})[0] == "node9:9000"


def test_the_worker_of_rank_1_is_the_second_node_in_tf_config(monkeypatch):
    monkeypatch.setenv("SLURM_PROCID", "1")
    monkeypatch.setenv("SLURM_STEP_NODELIST", "node[9-10]")
    monkeypatch.setenv("SLURM_STEP_TASKS_PER_NODE", "1(x2)")
    monkeypatch.setenv("SLURM_JOB_ID", "5")
    task = resolve_task(StrategyConfig(name="multi_worker_mirrored", cluster="slurm"), None)
    port = slurm.PORT_LOW + 5 * slurm.PORTS_PER_JOB
    assert json.loads(task.tf_config) == {"cluster": {"worker": [f"node9:{port}", f"node10:{port}"]},
                                          "task": {"type": "worker", "index": 1}}
    monkeypatch.setenv("SLURM_STEP_TASKS_PER_NODE", "1")
    with pytest.raises(ConfigError, match="2 nodes in the step's node list but tasks per node '1'"):
        resolve_task(StrategyConfig(name="multi_worker_mirrored", cluster="slurm"), None)
