"""The rehearsal's comparison (gui_app/core/rehearsal.py): which difference comes first, what the
tolerances let through, and what cannot be certified. The real runs: tests/engine/test_rehearse.py."""
from __future__ import annotations

import numpy as np

from gui_app.core.config import RunConfig
from gui_app.core.events import ReplicaStats, Step
from gui_app.core.rehearsal import (
    BITWISE,
    GPU_RULE,
    cannot_certify,
    certify,
    compare_state,
    compare_steps,
    sentences,
    tolerance_for,
)


def _step(n: int, loss: float = 1.0, batches=("a", "b"), grad: float = 2.0) -> Step:
    return Step(step=n, loss=loss, learning_rate=0.1,
                replicas=[ReplicaStats(replica=i, loss=loss, accuracy=0.5, examples=32, grad_norm=grad, batch=b)
                          for i, b in enumerate(batches)])


def test_the_batch_is_named_before_the_loss_it_explains():
    reference = {n: _step(n) for n in (1, 2, 3)}
    rehearsed = {1: _step(1), 2: _step(2, loss=1.5, batches=("a", "z")), 3: _step(3, loss=1.2)}
    found = compare_steps(reference, rehearsed, BITWISE)
    assert found.first is not None and (found.first.step, found.first.what) == (2, "batch of replica 1")
    assert not found.batches_identical and found.max_loss_diff == 0.5 and found.steps == 3


def test_a_missing_step_and_a_replica_figure_are_differences():
    found = compare_steps({1: _step(1), 2: _step(2)}, {1: _step(1)}, BITWISE)
    assert found.first is not None and found.first.step == 2
    assert found.first.what == "step missing from the rehearsed run"
    found = compare_steps({1: _step(1)}, {1: _step(1, grad=2.0000001)}, BITWISE)
    assert found.first is not None and found.first.what.startswith("grad_norm of replica 0")


def test_the_gpu_rule_lets_the_last_bits_through_and_not_more():
    assert tolerance_for(["/device:CPU:0", "/device:CPU:1"]) is BITWISE
    assert tolerance_for(["/job:worker/replica:0/task:0/device:GPU:0"]) is GPU_RULE
    near = {1: _step(1, loss=1.00005, grad=2.0001)}
    assert compare_steps({1: _step(1)}, near, GPU_RULE).first is None
    assert compare_steps({1: _step(1)}, near, BITWISE).first is not None
    assert compare_steps({1: _step(1)}, {1: _step(1, loss=1.001)}, GPU_RULE).first is not None


def test_the_final_state_weights_optimizer_and_counters():
    w = np.array([1.0, -2.0], np.float32)
    reference = {"model/layers/dense/vars/0": w, "optimizer/_variables/1/.ATTRIBUTES/VARIABLE_VALUE": w,
                 "step/.ATTRIBUTES/VARIABLE_VALUE": np.array(40)}
    same = compare_state(reference, dict(reference), BITWISE)
    assert same.first is None and same.max_weight_diff == 0.0 and same.max_optimizer_diff == 0.0
    moved = {**reference, "model/layers/dense/vars/0": w + np.float32(1e-5)}
    assert compare_state(reference, moved, GPU_RULE).first is None  # within 1e-6 + 1e-4 x 2
    found = compare_state(reference, moved, BITWISE)
    assert found.first is not None and found.first.step == 0
    assert found.first.what.startswith("final weights: model/layers/dense/vars/0 differs by")
    counted = compare_state(reference, {**reference, "step/.ATTRIBUTES/VARIABLE_VALUE": np.array(41)}, GPU_RULE)
    assert counted.first is not None and "final state: step" in counted.first.what  # counters: never a tolerance
    lost = compare_state(reference, {k: v for k, v in reference.items() if not k.startswith("optimizer")}, BITWISE)
    assert lost.first is not None and "is not in both final checkpoints" in lost.first.what


def test_the_certificate_and_its_lines():
    steps = compare_steps({1: _step(1)}, {1: _step(1)}, BITWISE)
    state = compare_state({"model/v": np.zeros(2)}, {"model/v": np.zeros(2)}, BITWISE)
    cert = certify(steps, state, BITWISE, "/runs/a", "/runs/b", strategy="mirrored", signal="KILL", at=1,
                   interrupted_at=2, resumed_from=0)
    assert cert.equivalent and cert.tolerance == "bitwise"
    assert sentences(cert).splitlines()[:2] == ["EQUIVALENT: mirrored, SIGKILL at step 1, 1 steps compared (bitwise)",
                                                "interrupted after step 2, resumed from step 0"]


def test_what_cannot_be_certified():
    assert cannot_certify(RunConfig()) is None
    ps = RunConfig().replace(strategy={"name": "parameter_server", "workers": 2, "ps": 1, "devices": []})
    assert "parameter servers" in (cannot_certify(ps) or "")
    assert "training.seed is null" in (cannot_certify(RunConfig().replace(training={"seed": None})) or "")
