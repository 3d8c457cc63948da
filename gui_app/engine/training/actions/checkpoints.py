"""Checkpoints: every ``checkpoint_every_steps`` steps, every ``checkpoint_every_minutes``, at
each epoch's end, when asked (the ``checkpoint`` word) and when the run stops. The events so
far are made durable with each one (a checkpoint is never ahead of the history).

In a multi-worker cluster every worker must save together and each has its own clock: a
checkpoint due by the clock is asked for like a ``checkpoint`` word, and the workers agree on
it at the next step group (engine/cluster/agreement.py).

A state whose weights are not all finite is never saved (it fails the run instead): the last
finite checkpoint is never rotated out by a poisoned one. The replay from the last finite one
(engine/training/replay.py) then says which layer's weights went first, and at which step.
"""
from __future__ import annotations

import time

from gui_app.core.config import TrainingConfig
from gui_app.core.events import Checkpoint, NonFinite
from gui_app.engine.run.control import RunControl
from gui_app.engine.run.event_writer import EventWriter
from gui_app.engine.run.failures import TrainingDiverged
from gui_app.engine.training.actions.base import Action, EpochSummary, StepGroup
from gui_app.engine.training.context import ModelState
from gui_app.engine.training.replay import Replayer


class Checkpoints(Action):
    def __init__(self, state: ModelState, events: EventWriter, control: RunControl, cfg: TrainingConfig,
                 agreed: bool, replayer: Replayer | None = None):
        self.state, self.events, self.control, self.replayer = state, events, control, replayer
        self.every_steps, self.every_seconds = cfg.checkpoint_every_steps, 60 * (cfg.checkpoint_every_minutes or 0)
        self.agreed = agreed
        self._last = time.monotonic()

    def save(self) -> None:
        step = self.state.steps_done()
        if not self.state.weights_finite():  # quarantined: never kept as a good one (every worker agrees)
            replay = self.replayer.explain(step).fields() if self.replayer is not None else {}
            self.events.emit(NonFinite(step=step, first="weights", checkpoint=self.state.kept_checkpoint_path(),
                                       **replay))
            raise TrainingDiverged(f"the weights became NaN or infinite by step {step} (the loss was still finite); "
                                   f"try a lower training.learning_rate ({self.state.kept_checkpoint()})")
        path = self.state.manager.save(checkpoint_number=step)
        self._last = time.monotonic()
        self.events.emit(Checkpoint(step=step, path=path))
        self.events.sync()

    def on_steps(self, group: StepGroup) -> None:
        if self.control.take_checkpoint_request() or self._every_steps(group) or self._clock():
            self.save()

    def _every_steps(self, group: StepGroup) -> bool:
        return bool(self.every_steps) and group.first_step // self.every_steps != group.last_step // self.every_steps

    def _clock(self) -> bool:
        if not (self.every_seconds and time.monotonic() - self._last >= self.every_seconds):
            return False
        if self.agreed:
            self.control.command("checkpoint")  # agreed at the next group, saved then by every worker
            self._last = time.monotonic()
            return False
        return True

    def on_epoch_end(self, summary: EpochSummary) -> None:
        self.save()

    def on_stop(self, step: int) -> None:
        self.save()
