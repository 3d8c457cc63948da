"""Fail the run at the first step whose loss is NaN or infinite (Keras's ``TerminateOnNaN``).

It fails before the group's events and checkpoints: the last checkpoint stays the last good one
(and the checkpoints refuse a state whose weights are not finite: actions/checkpoints.py). The
message names the checkpoint really kept, or says there is none.
"""
from __future__ import annotations

from gui_app.engine.errors import TrainingDiverged
from gui_app.engine.training.actions.base import Action, StepGroup
from gui_app.engine.training.context import ModelState


class NanGuard(Action):
    def __init__(self, state: ModelState):
        self.state = state

    def on_steps(self, group: StepGroup) -> None:
        bad = group.stats.first_non_finite()
        if bad is not None:
            raise TrainingDiverged(f"the loss became NaN or infinite at step {group.first_step + bad + 1}; "
                                   f"try a lower training.learning_rate ({self.state.kept_checkpoint()})")
