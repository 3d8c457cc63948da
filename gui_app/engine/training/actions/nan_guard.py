"""Fail the run at the first step whose loss is NaN or infinite (Keras's ``TerminateOnNaN``),
leaving the evidence ``diagnose`` reads (docs/diagnose.md).

It fails before the group's checkpoint: the last checkpoint stays the last good one (and the
checkpoints refuse a state whose weights are not finite: actions/checkpoints.py). The message
names the checkpoint really kept, or says there is none.

Before it fails it tells what the group's statistics hold, at no cost on the happy path (the
figures are on the host already): the group's finite steps as ``step`` events (the gradient
norms that led there), then a ``non_finite`` event naming the first step, replica and worker
whose local loss or local gradient norm was not finite, and which of the two it was. The guard
trips on the loss only: under mixed precision a non-finite scaled gradient is a step the loss
scale skips on purpose, so the gradients are evidence only without it.

Then, and only then, the expensive part: the replay of the steps from the last good checkpoint
(engine/training/replay.py) names the first layer and the examples; its findings go into the
same ``non_finite`` event.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from gui_app.core.events import NonFinite
from gui_app.engine.run.failures import TrainingDiverged
from gui_app.engine.training.actions.base import Action, StepGroup
from gui_app.engine.training.actions.run_events import RunEvents
from gui_app.engine.training.context import ModelState
from gui_app.engine.training.loop import GRAD_NORM, LOSS
from gui_app.engine.training.replay import Replayer
from gui_app.engine.training.steps import StepStats


class Evidence(NamedTuple):
    at: int  # the step's index in its group
    row: int  # the first row (replica) not finite at it
    rows: list[int]  # every row not finite at it
    first: str  # loss | gradients


def first_evidence(stats: StepStats, gradients: bool = True) -> Evidence | None:
    """The first step of the group with a non-finite local loss (or, with ``gradients``, local
    gradient norm) in any row, and what went first there; None when every figure is finite."""
    loss_bad = ~np.isfinite(stats.values[:, :, LOSS])
    bad = loss_bad | ~np.isfinite(stats.values[:, :, GRAD_NORM]) if gradients else loss_bad
    if not bad.any():
        return None
    index = int(np.argmax(bad.any(axis=1)))
    rows = [int(r) for r in np.flatnonzero(bad[index])]
    losses = [r for r in rows if loss_bad[index, r]]
    row = losses[0] if losses else rows[0]  # a loss gone bad says more than a norm gone bad beside it
    return Evidence(index, row, rows, "loss" if losses else "gradients")


class NanGuard(Action):
    def __init__(self, state: ModelState, told: RunEvents | None = None, gradients: bool = True,
                 replayer: Replayer | None = None):
        self.state, self.told, self.gradients, self.replayer = state, told, gradients, replayer

    def on_steps(self, group: StepGroup) -> None:
        bad = group.stats.first_non_finite()
        if bad is None:
            return
        if self.told is not None:
            self._tell(group, group.first_step + bad + 1)
        raise TrainingDiverged(f"the loss became NaN or infinite at step {group.first_step + bad + 1}; "
                               f"try a lower training.learning_rate ({self.state.kept_checkpoint()})")

    def _tell(self, group: StepGroup, tripped: int) -> None:
        assert self.told is not None
        found = first_evidence(group.stats, self.gradients)
        if found is None:  # cannot be: the loss of some row is not finite
            return
        self.told.on_steps(group, count=found.at)  # the finite steps before it
        stats = group.stats
        where = [stats.rows[found.at][r] for r in found.rows]
        values = stats.values[found.at, found.row]
        step = group.first_step + found.at + 1
        # Replayed to the step whose loss tripped the guard: an overflowed norm (``gradients``
        # before it) may come from finite gradients whose squares overflow.
        replay = self.replayer.explain(tripped).fields() if self.replayer is not None else {}
        self.told.events.emit(NonFinite(
            step=step, first=found.first, replica=where[0].replica,
            worker=where[0].worker if where[0].worker >= 0 else None, replicas=[row.replica for row in where],
            loss=float(values[LOSS]), grad_norm=float(values[GRAD_NORM]),
            checkpoint=self.state.kept_checkpoint_path(), **replay))
