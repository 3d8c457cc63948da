"""``replica-studio scaling``: real bursts of ``train``, stopped through the control channel."""
from __future__ import annotations

import json

import pytest
from engine_helpers import parse_jsonl, run_cli


@pytest.mark.slow  # two TensorFlow processes and a device check: ~35 s
def test_a_burst_per_configuration_and_a_report(tmp_path, write_config):
    config = write_config({"dataset": {"name": "digits"}, "model": {"name": "mlp"},
                           "training": {"global_batch_size": 64, "epochs": 20, "steps_per_call": 5}})
    done = run_cli("scaling", str(config), "--strategies", "one_device,mirrored", "--max-replicas", "1",
                   "--steps", "10", "--warmup", "5", "-o", str(tmp_path / "out"), "--json", timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = parse_jsonl(done.stdout)
    assert [e["type"] for e in lines][-1] == "scaling_report"
    assert all(e["type"] == "progress" for e in lines[:-1]) and lines[-2]["fraction"] == 1.0
    report = json.loads((tmp_path / "out" / "scaling.json").read_text())
    assert [r["label"] for r in report["rows"]] == ["one_device", "mirrored, 1 replica"]
    for row in report["rows"]:
        assert row["error"] is None and row["examples_per_sec"] > 0 and row["steps"] >= 10
        assert abs(sum(row["time_split"].values()) - 1.0) < 1e-6
    assert max(r["speedup"] for r in report["rows"]) == 1.0  # against the faster one-replica burst
    assert (tmp_path / "out" / "scaling.svg").read_text().startswith("<svg")


def test_bad_arguments_are_one_line_and_exit_2(tmp_path, write_config):
    config = write_config({"dataset": {"name": "digits"}})
    done = run_cli("scaling", str(config), "--strategies", "mirroed", timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1] == "replica-studio scaling: --strategies: unknown strategy 'mirroed'"


def test_options_without_a_multi_replica_configuration_is_one_line_and_exit_2(tmp_path, write_config):
    config = write_config({"dataset": {"name": "digits"}})
    done = run_cli("scaling", str(config), "--strategies", "one_device,mirrored", "--max-replicas", "1", "--options",
                   timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1] == (
        "replica-studio scaling: --options: needs mirrored or multi_worker_mirrored in --strategies and "
        "--max-replicas of at least 2")
