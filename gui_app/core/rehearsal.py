"""Whether a resumed run is the run that was never interrupted: the comparison behind
``replica-studio rehearse`` (engine/commands/rehearse.py trains the two; docs/detached.md,
"Rehearse a preemption").

Step for step: the batch each replica trained on (``training.batch_fingerprints``), its
examples, the learning rate, the loss and every replica's loss, accuracy and gradient norm; then
the final checkpoints' variables: the model's weights, the optimizer's state (slots, iteration
count, a loss scale) and the step and data seed. The first difference is named by its step (0:
the final state) and what differed, the batch before the figures it explains.

Qt-free and TensorFlow-free: the engine reads the checkpoints into NumPy arrays.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping

import numpy as np

from gui_app.core import rundir
from gui_app.core.answers import Certificate, Difference
from gui_app.core.config import RunConfig
from gui_app.core.events import Step


@dataclass(frozen=True)
class Tolerance:
    """How far two figures may be apart and still be the same run: ``abs + rel * |reference|``."""

    rel: float = 0.0
    abs: float = 0.0

    @property
    def name(self) -> str:
        return "bitwise" if self.rel == self.abs == 0 else f"relative {self.rel:g}, absolute {self.abs:g}"

    def close(self, a: float | None, b: float | None) -> bool:
        if a is None or b is None:
            return a is b  # NaN and infinities are written as null: both or neither
        return a == b or abs(a - b) <= self.abs + self.rel * abs(a)


# CPU kernels give the same bits for the same inputs, run after run: any difference is a real one.
BITWISE = Tolerance()
# GPU kernels may sum in another order from run to run (atomics, cuDNN's algorithm choice): a
# reference run differs from itself by about this much in the first steps (docs/detached.md).
GPU_RULE = Tolerance(rel=1e-4, abs=1e-6)


def tolerance_for(devices: Iterable[str | None]) -> Tolerance:
    return GPU_RULE if any("GPU" in (d or "").upper() for d in devices) else BITWISE


def cannot_certify(config: RunConfig) -> str | None:
    """Why a rehearsal of ``config`` could not be equivalent whatever the resume does, or None."""
    if config.strategy.name == "parameter_server":
        return ("parameter servers apply each worker's update when it arrives and each worker draws its own "
                "unseeded order: two uninterrupted runs of this config already differ, so no resume can match one")
    if config.training.seed is None:
        return ("training.seed is null: each run draws its own initial weights and data order; set a seed to "
                "rehearse")
    return None


def step_history(run_dir: str | Path) -> dict[int, Step]:
    """The run's steps by number, the last written of each (a resumed run repeats none)."""
    return {e.step: e for e in rundir.read_events(run_dir) if isinstance(e, Step)}


@dataclass
class StepComparison:
    steps: int
    batches_identical: bool
    max_loss_diff: float | None
    first: Difference | None


def _diff(a: float | None, b: float | None) -> float:
    return 0.0 if a is None or b is None else abs(a - b)


def _step_difference(s: int, ref: Step, got: Step, tol: Tolerance) -> str | None:
    """What first differs in step ``s``: the batches before the figures they explain."""
    if len(ref.replicas) != len(got.replicas):
        return f"{len(got.replicas)} replicas instead of {len(ref.replicas)}"
    for a, b in zip(ref.replicas, got.replicas):
        if a.batch != b.batch:
            return f"batch of replica {a.replica}"
    for a, b in zip(ref.replicas, got.replicas):
        if a.examples != b.examples:
            return f"examples of replica {a.replica}: {b.examples} instead of {a.examples}"
    if not tol.close(ref.learning_rate, got.learning_rate):
        return f"learning rate {got.learning_rate} instead of {ref.learning_rate}"
    if not tol.close(ref.loss, got.loss):
        return f"loss {got.loss} instead of {ref.loss}"
    for a, b in zip(ref.replicas, got.replicas):
        for name in ("loss", "accuracy", "grad_norm"):
            if not tol.close(getattr(a, name), getattr(b, name)):
                return f"{name} of replica {a.replica}: {getattr(b, name)} instead of {getattr(a, name)}"
    return None


def compare_steps(reference: Mapping[int, Step], rehearsed: Mapping[int, Step], tol: Tolerance) -> StepComparison:
    first: Difference | None = None
    identical, max_loss = True, None
    for s in sorted(set(reference) | set(rehearsed)):
        ref, got = reference.get(s), rehearsed.get(s)
        if ref is None or got is None:
            first = first or Difference(s, "step missing from the " + ("reference" if ref is None else "rehearsed run"))
            continue
        if [r.batch for r in ref.replicas] != [r.batch for r in got.replicas]:
            identical = False
        max_loss = max(max_loss or 0.0, _diff(ref.loss, got.loss))
        if first is None and (what := _step_difference(s, ref, got, tol)) is not None:
            first = Difference(s, what)
    return StepComparison(len(reference), identical, max_loss, first)


@dataclass
class StateComparison:
    max_weight_diff: float | None
    max_optimizer_diff: float | None
    first: Difference | None


def compare_state(reference: Mapping[str, np.ndarray], rehearsed: Mapping[str, np.ndarray],
                  tol: Tolerance) -> StateComparison:
    """The final checkpoints' variables by name: ``model/...`` the weights, ``optimizer/...`` its
    state, the rest (the step, the data seed) must be equal."""
    weights = optimizer = None
    first: Difference | None = None
    for name in sorted(set(reference) | set(rehearsed)):
        a, b = reference.get(name), rehearsed.get(name)
        if a is None or b is None or a.shape != b.shape:
            first = first or Difference(0, f"variable {name} is not in both final checkpoints")
            continue
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        gap = float(np.max(np.abs(a64 - b64))) if a.size else 0.0
        if name.startswith("model/"):
            weights = max(weights or 0.0, gap)
        elif name.startswith("optimizer/"):
            optimizer = max(optimizer or 0.0, gap)
        counter = name.startswith(("step/", "data_seed/"))  # counters and seeds: equal, whatever the kernels
        limit = tol.abs + tol.rel * float(np.max(np.abs(a64))) if a.size and not counter else 0.0
        if first is None and not (np.array_equal(a, b) or gap <= limit):
            part = "weights" if name.startswith("model/") else "optimizer state" if name.startswith("optimizer/") \
                else "state"
            first = Difference(0, f"final {part}: {name} differs by {gap:.3g}")
    return StateComparison(weights, optimizer, first)


def certify(steps: StepComparison, state: StateComparison, tol: Tolerance, reference_run: str,
            rehearsed_run: str, **facts) -> Certificate:
    """The certificate: equivalent when no step and no final variable differs beyond ``tol``."""
    first = steps.first or state.first
    return Certificate(equivalent=first is None, steps=steps.steps, batches_identical=steps.batches_identical,
                       max_loss_diff=steps.max_loss_diff, max_weight_diff=state.max_weight_diff,
                       first_difference=first, reference_run=reference_run, rehearsed_run=rehearsed_run,
                       max_optimizer_diff=state.max_optimizer_diff, tolerance=tol.name, **facts)


def sentences(cert: Certificate) -> str:
    """The certificate in a few plain lines."""
    if cert.cannot_certify:
        return f"cannot certify: {cert.cannot_certify}"
    how = f"worker {cert.worker} sent SIG{cert.signal}" if cert.worker is not None else f"SIG{cert.signal}"
    lines = [("EQUIVALENT" if cert.equivalent else "NOT EQUIVALENT")
             + f": {cert.strategy}, {how} at step {cert.at}, {cert.steps} steps compared ({cert.tolerance})"]
    if cert.interrupted_at is not None or cert.resumed_from is not None:
        lines.append(f"interrupted after step {cert.interrupted_at}, resumed from step {cert.resumed_from}")
    lines.append(f"batches identical: {'yes' if cert.batches_identical else 'no'}; max loss difference "
                 f"{_g(cert.max_loss_diff)}; max weight difference {_g(cert.max_weight_diff)}; "
                 f"max optimizer-state difference {_g(cert.max_optimizer_diff)}")
    if cert.first_difference is not None:
        where = f"step {cert.first_difference.step}" if cert.first_difference.step else "the final state"
        lines.append(f"first difference: {where}: {cert.first_difference.what}")
    lines.append(f"reference run: {cert.reference_run}")
    lines.append(f"rehearsed run: {cert.rehearsed_run}")
    return "\n".join(lines)


def _g(x: float | None) -> str:
    return "-" if x is None else f"{x:.3g}"
