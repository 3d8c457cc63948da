"""``train`` asks the one split rule (core/batch_split.py): a batch that does not divide over the
replicas of one process trains, with the rule's warning in the rule's words; the workers of a
cluster refuse it, in the same words."""
from __future__ import annotations

import pytest
from engine_helpers import config_dict, parse_jsonl, run_cli

from gui_app.core.batch_split import batch_split


def test_train_warns_of_an_uneven_split_in_the_rules_words(tmp_path, write_config):
    config = write_config(config_dict(strategy={"devices": ["CPU:0", "CPU:1", "CPU:2"]}, runtime={"cpu_devices": 3},
                                      training={"epochs": 1, "global_batch_size": 64}))
    proc = run_cli("train", str(config), "--runs-dir", str(tmp_path / "runs"), "--events", "jsonl")
    assert proc.returncode == 0, proc.stderr[-2000:]
    events = parse_jsonl(proc.stdout)
    warnings = [e["message"] for e in events if e["type"] == "warning"]
    assert batch_split("mirrored", 64, 3).warning in warnings
    assert events[-1]["status"] == "completed"


@pytest.mark.slow
def test_workers_of_a_cluster_refuse_an_uneven_split_in_the_same_words(tmp_path, write_config):
    """Two local workers of three CPU replicas each: 64 over 6 replicas cannot be sharded
    (TensorFlow's InputContext raises), so each worker ends with the rule's error and train exits 2."""
    config = write_config(config_dict(strategy={"name": "multi_worker_mirrored", "workers": 2, "devices": []},
                                      runtime={"cpu_devices": 3}, training={"epochs": 1, "global_batch_size": 64}))
    proc = run_cli("train", str(config), "--runs-dir", str(tmp_path / "runs"), "--events", "text")
    assert proc.returncode == 2, proc.stderr[-2000:]
    error = batch_split("multi_worker_mirrored", 64, 6, workers=2).error
    assert f"replica-studio worker: {error}" in proc.stderr
    assert proc.stderr.strip().splitlines()[-1].endswith(error)
