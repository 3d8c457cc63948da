"""TensorBoard files in the run directory (engine/training/tensorboard.py writes them without the
``tensorboard`` package): every step's loss, accuracy and learning rate, each replica's loss and
gradient norm (a parameter-server step: the loss of the worker that ran it), and the validation
figures at each epoch's end. Created at the first step group."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from gui_app.core import rundir
from gui_app.engine.training.actions.base import Action, EpochSummary, StepGroup
from gui_app.engine.training.loop import GRAD_NORM, LOSS
from gui_app.engine.training.tensorboard import ScalarWriter


class TensorBoard(Action):
    def __init__(self, run_dir: Path):
        self._folder = run_dir / rundir.TENSORBOARD_DIR
        self._writers: tuple[ScalarWriter, ScalarWriter] | None = None  # train, validation

    def _open(self) -> tuple[ScalarWriter, ScalarWriter]:
        if self._writers is None:
            self._writers = (ScalarWriter(self._folder / "train"), ScalarWriter(self._folder / "validation"))
        return self._writers

    def on_steps(self, group: StepGroup) -> None:
        train, _ = self._open()
        stats = group.stats
        losses, accuracies = stats.totals
        steps = np.arange(group.first_step + 1, group.last_step + 1)
        if stats.per_worker:  # a different worker each step: its own tag
            for i, step in enumerate(steps):
                worker = stats.rows[i][0].worker
                train.scalars(int(step), {"loss": losses[i], "accuracy": accuracies[i],
                                          "learning_rate": group.learning_rates[i],
                                          f"worker_{worker}/loss": stats.values[i, 0, LOSS]})
            return
        replicas = stats.values.shape[1]
        tags = ("loss", "accuracy", "learning_rate") + tuple(
            f"replica_{r}/{name}" for r in range(replicas) for name in ("loss", "grad_norm"))
        rows = np.empty((stats.k, len(tags)), np.float32)
        rows[:, 0], rows[:, 1], rows[:, 2] = losses, accuracies, group.learning_rates
        rows[:, 3:] = stats.values[:, :, [LOSS, GRAD_NORM]].reshape(stats.k, -1)
        train.rows(steps, tags, rows)  # one graph call per step group, not one eager write per scalar

    def on_epoch_end(self, summary: EpochSummary) -> None:
        train, validation = self._open()
        if summary.val_loss is not None and summary.val_accuracy is not None:
            validation.scalars(summary.step, {"loss": summary.val_loss, "accuracy": summary.val_accuracy})
            validation.flush()
        train.flush()

    def close(self) -> None:
        for writer in self._writers or ():
            writer.close()
