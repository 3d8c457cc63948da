"""The one rule for splitting a global batch (core/batch_split.py) and each caller that asks it:
the config, ``submit`` (Slurm and Kubernetes), and the window's strategy form (tests/ui/test_forms.py);
``train`` and ``worker`` in tests/engine/test_batch_split_engine.py."""
from __future__ import annotations

import json

import pytest

from gui_app.core.batch_split import BatchSplit, batch_split, scheduled_split
from gui_app.core.config import ConfigError, RunConfig
from gui_app.engine.commands import submit as submit_command
from gui_app.engine.commands.cli import build_parser
from gui_app.engine.schedulers.kubernetes import submit as kubernetes_submit
from gui_app.engine.schedulers.kubernetes.manifest import KubernetesOptions
from gui_app.engine.schedulers.slurm import submit as slurm_submit
from gui_app.engine.schedulers.slurm.script import SlurmOptions

UNEVEN = ("training.global_batch_size: 64 does not divide evenly over 3 replicas: 22, 21 and 21 examples. "
          "Try 63 or 66.")


def test_one_process_splits_unevenly_with_a_warning():
    assert batch_split("mirrored", 64, 3) == BatchSplit(warning=UNEVEN)
    assert batch_split("multi_worker_mirrored", 64, 3, workers=1).warnings() == [UNEVEN]


def test_several_workers_need_an_even_split():
    # TensorFlow's InputContext.get_per_replica_batch_size raises for 64 over 6 replicas.
    split = batch_split("multi_worker_mirrored", 64, 6, workers=2)
    assert split.error == ("training.global_batch_size: 64 does not divide evenly over 6 replicas: 4 replicas get 11 "
                           "examples, 2 get 10. Try 60 or 66. A cluster of 2 workers needs an even split (each "
                           "worker reads its own shard of the batch).")
    with pytest.raises(ConfigError, match="A cluster of 2 workers"):
        split.warnings()
    assert batch_split("multi_worker_mirrored", 66, 6, workers=2) == BatchSplit()


def test_too_small_a_batch_and_micro_batches_that_do_not_fit_are_errors():
    assert batch_split("mirrored", 2, 3).error == "training.global_batch_size: 2 is smaller than the 3 replicas"
    assert batch_split("mirrored", 12, 2, accumulation=8).error == (
        "training.accumulation_steps: 8 micro-batches do not fit the 6 examples per replica")


def test_parameter_servers_split_nothing():
    assert batch_split("parameter_server", 7, 3, workers=3) == BatchSplit()


def test_the_config_asks_the_rule_for_its_device_list():
    data = {"strategy": {"name": "mirrored", "devices": ["CPU:0", "CPU:1", "CPU:2"]}, "runtime": {"cpu_devices": 3},
            "training": {"global_batch_size": 2}}
    with pytest.raises(ConfigError) as info:
        RunConfig.from_dict(data)
    assert str(info.value) == batch_split("mirrored", 2, 3).error
    data["training"]["global_batch_size"] = 64  # uneven in one process: allowed, warned by train
    assert RunConfig.from_dict(data).training.global_batch_size == 64


def _cluster_config(tmp_path, batch: int):
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"strategy": {"name": "multi_worker_mirrored", "workers": 2},
                                "runtime": {"cpu_devices": 3}, "training": {"global_batch_size": batch, "seed": 1}}))
    return path


def test_slurm_submit_refuses_an_uneven_split_before_anything_is_queued(tmp_path):
    runs = tmp_path / "runs"
    with pytest.raises(ConfigError) as info:
        slurm_submit.submit(str(_cluster_config(tmp_path, 64)), runs, SlurmOptions())
    assert str(info.value) == batch_split("multi_worker_mirrored", 64, 6, workers=2).error
    assert not runs.exists() or not any(runs.iterdir())
    # Two GPUs a node: 4 replicas, and 64 splits evenly over them.
    assert scheduled_split(RunConfig.load(str(_cluster_config(tmp_path, 64))), 2, 2) == BatchSplit()


def test_kubernetes_submit_refuses_the_same_split_in_the_same_words(tmp_path):
    options = KubernetesOptions()
    with pytest.raises(ConfigError) as info:
        kubernetes_submit.submit(str(_cluster_config(tmp_path, 64)), options, tmp_path / "runs")
    assert str(info.value) == batch_split("multi_worker_mirrored", 64, 6, workers=2).error


def test_the_submit_command_says_it_in_one_line_and_exits_2(tmp_path, capsys):
    args = build_parser().parse_args(["submit", str(_cluster_config(tmp_path, 64)), "--slurm",
                                      "--runs-dir", str(tmp_path / "runs")])
    assert submit_command.run(args) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"replica-studio submit: {batch_split('multi_worker_mirrored', 64, 6, workers=2).error}"]
