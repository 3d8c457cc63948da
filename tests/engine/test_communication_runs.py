"""Communication options through the real engine: the run reports what its all-reduce uses,
accumulation keeps a step's meaning, and a bad combination is refused before TensorFlow."""
from __future__ import annotations

import json
import sys

import numpy as np
import pytest
from engine_helpers import config_dict, run_cli, run_in_process


def test_a_bad_combination_exits_2_with_one_line(tmp_path):
    config = tmp_path / "ps.json"
    config.write_text(json.dumps({"strategy": {"name": "parameter_server", "workers": 2, "ps": 1},
                                  "training": {"accumulation_steps": 4}}))
    done = run_cli("train", str(config), "--runs-dir", str(tmp_path / "runs"), timeout=120)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "training.accumulation_steps: parameter_server workers update" in lines[0], lines
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def _train(tmp_path, name, strategy=None, **training):
    config = tmp_path / f"{name}.json"
    data = config_dict(model={"name": "mlp"}, strategy=strategy or {},
                       training={"epochs": 1, "global_batch_size": 64, "steps_per_call": 5, "optimizer": "sgd",
                                 "learning_rate": 0.05, **training})
    config.write_text(json.dumps(data))
    code, tap = run_in_process("train", config, tmp_path / name)
    assert code == 0, tap.of("error")
    return tap


def test_accumulation_and_float16_runs_match_the_baseline(tmp_path):
    """Same seed, same data order: M = 4 micro-batches train (nearly) the same steps as M = 1,
    and the float16 all-reduce stays within its rounding; the run says what it used."""
    base = _train(tmp_path, "base")
    accumulated = _train(tmp_path, "acc", accumulation_steps=4)
    low = _train(tmp_path, "f16", strategy={"all_reduce_dtype": "float16"})
    assert low.of("run_started")[0]["strategy"]["all_reduce_dtype"] == "float16"
    assert base.of("run_started")[0]["strategy"]["all_reduce_dtype"] == "float32"
    losses = {name: np.array([e["loss"] for e in tap.of("step")])
              for name, tap in (("base", base), ("acc", accumulated), ("f16", low))}
    assert len(losses["base"]) == len(losses["acc"]) == 20  # 1,294 training examples / 64
    np.testing.assert_allclose(losses["acc"], losses["base"], rtol=1e-3)
    np.testing.assert_allclose(losses["f16"], losses["base"], rtol=2e-2)
    assert [r["examples"] for r in accumulated.of("step")[-1]["replicas"]] == [32, 32]


@pytest.mark.slow  # a two-worker cluster: ~40 s
@pytest.mark.skipif(sys.platform != "linux", reason="the cluster tests read /proc and use PDEATHSIG")
def test_two_workers_use_the_pack_size_ring_and_float16(tmp_path):
    from cluster_helpers import Launched

    config = tmp_path / "mw.json"
    config.write_text(json.dumps({
        "dataset": {"name": "digits"}, "model": {"name": "mlp"},
        "strategy": {"name": "multi_worker_mirrored", "workers": 2, "communication": "ring",
                     "bytes_per_pack": 65536, "all_reduce_dtype": "float16"},
        "training": {"epochs": 1, "global_batch_size": 64, "seed": 5, "steps_per_call": 5, "accumulation_steps": 2},
        "runtime": {"cpu_devices": 1}}))
    run = Launched("train", str(config), "--runs-dir", str(tmp_path / "runs"))
    assert run.wait() == 0, run.stderr[-3000:]
    strategy = run.of("run_started")[0]["strategy"]
    # Read back from the strategy's CommunicationOptions, not echoed from the config.
    assert (strategy["bytes_per_pack"], strategy["implementation"], strategy["all_reduce_dtype"]) == (
        65536, "ring", "float16")
    assert run.events[-1]["status"] == "completed"
    digests = run.digests()
    assert digests["worker 0"] == digests["worker 1"]  # one all-reduce per step kept the workers in step
