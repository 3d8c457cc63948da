"""EpochHold: the run pauses after every epoch's validation until a ``continue`` (or a ``stop``)
arrives on its control channel -- ``train --pause-after-each-epoch``.

A sweep uses it to decide on pruning before the next epoch starts: without it a trial goes on
training while the sweep reads its epoch and asks Optuna, and on digits (an epoch of the MLP in
0.1 s) a pruned trial ran 3 to 6 more epochs before its stop arrived (docs/benchmarks.md).

The pause is the run's own pause (the controller's ``paused`` event at the next group, then
``continued``), so whoever continues it needs only the run's state: a paused event at the step
of its last epoch's end means "waiting for the decision on that epoch" -- also for a sweep that
was killed and resumed meanwhile. At the last epoch's end the pause is asked too, but the
controller checks it only before a next group: the run saves its model and ends as usual.
"""
from __future__ import annotations

from gui_app.engine.run.control import RunControl
from gui_app.engine.training.actions.base import Action, EpochSummary


class EpochHold(Action):
    def __init__(self, control: RunControl) -> None:
        self.control = control

    def on_epoch_end(self, summary: EpochSummary) -> None:
        self.control.command("pause")
