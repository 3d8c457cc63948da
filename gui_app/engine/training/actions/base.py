"""What the run controller hands its actions, and the hooks it calls (in this order within a
step group: ``on_steps`` of every action in turn; at an epoch's end ``on_epoch_end``)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gui_app.engine.training.steps import StepStats


@dataclass(frozen=True)
class StepGroup:
    """Steps ``first_step + 1`` to ``first_step + k`` (1-based, as events count) of ``epoch`` (0-based)."""

    stats: StepStats
    first_step: int
    epoch: int
    learning_rates: np.ndarray  # [k]

    @property
    def last_step(self) -> int:
        return self.first_step + self.stats.k


@dataclass(frozen=True)
class EpochSummary:
    epoch: int  # 0-based
    step: int  # global steps done
    loss: float | None  # the mean over the epoch's steps (of this process)
    accuracy: float | None
    val_loss: float | None
    val_accuracy: float | None
    duration: float  # seconds


class Action:
    """One purpose around the training steps; every hook does nothing unless overridden."""

    def on_steps(self, group: StepGroup) -> None:
        """After each step group (the global step counter already counts it)."""

    def on_epoch_end(self, summary: EpochSummary) -> None:
        """After an epoch's last group and its validation."""

    def on_pause(self, step: int) -> None:
        """The run pauses before its next group."""

    def on_continue(self, step: int) -> None:
        """A paused run goes on."""

    def on_stop(self, step: int) -> None:
        """The run stops at ``step`` before its planned end."""

    def close(self) -> None:
        """The run is over, however it ended."""
