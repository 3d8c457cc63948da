"""Loss, accuracy and learning rate per step, with each epoch's validation point: the numbers of
the Training tab, folded from a run's ``step``, ``epoch_end`` and ``run_started`` events."""
from __future__ import annotations

import math

import numpy as np

from gui_app.core.events import EpochEnd, RunStarted, Step
from gui_app.core.history.buffers import Ema, GrowableArray, number

STEP, LOSS, ACCURACY, LR, LOSS_EMA, ACCURACY_EMA = range(6)  # columns of TrainingSeries.steps
VAL_STEP, VAL_LOSS, VAL_ACCURACY = range(3)  # columns of TrainingSeries.validation


class TrainingSeries:
    """The per-step and per-epoch numbers of one run.

    Accuracy is stored in percent. Steps stay strictly increasing (clip-to-view needs it):
    a ``run_started`` whose ``start_step`` is behind the last point, or a step that was already
    seen, drops the points after it, so a resumed run continues the curves from its
    checkpoint and a replayed step replaces the old one. The smoothed columns follow
    ``smoothing`` (the chart's setting, kept here because the EMA is built step by step).
    """

    def __init__(self, smoothing: float = 0.9) -> None:
        self.steps = GrowableArray(6)
        self.validation = GrowableArray(3, capacity=64)
        self._loss_ema = Ema(smoothing)
        self._accuracy_ema = Ema(smoothing)

    @property
    def smoothing(self) -> float:
        return self._loss_ema.smoothing

    def clear(self) -> None:
        self.steps.clear()
        self.validation.clear()
        self._loss_ema.reset()
        self._accuracy_ema.reset()

    def start(self, run: RunStarted) -> bool:
        if len(self.steps) and self.steps.last(STEP) > run.start_step:
            self.truncate_after(run.start_step)
            return True
        return False

    def add_step(self, event: Step) -> bool:
        step = float(event.step)
        if len(self.steps) and step <= self.steps.last(STEP):
            self.truncate_after(step - 1)
        loss = number(event.loss)
        accuracy = 100.0 * number(event.accuracy)
        self.steps.append((step, loss, accuracy, number(event.learning_rate),
                           self._loss_ema.update(loss), self._accuracy_ema.update(accuracy)))
        return True

    def extend(self, steps: np.ndarray, loss: np.ndarray, accuracy: np.ndarray, learning_rate: np.ndarray) -> None:
        """:meth:`add_step` of many steps at once, all after the last point (a long run's buckets,
        gui_app/core/history/coarse.py); figures as floats, NaN where not measured."""
        accuracy = 100.0 * accuracy
        loss_ema = [self._loss_ema.update(v) for v in loss.tolist()]
        accuracy_ema = [self._accuracy_ema.update(v) for v in accuracy.tolist()]
        self.steps.extend(np.column_stack([steps, loss, accuracy, learning_rate, loss_ema, accuracy_ema]))

    def extend_validation(self, steps: np.ndarray, val_loss: np.ndarray, val_accuracy: np.ndarray) -> None:
        """:meth:`add_epoch` of many validation points at once, all after the last one."""
        val_accuracy = 100.0 * val_accuracy
        keep = ~(np.isnan(val_loss) & np.isnan(val_accuracy))
        if keep.any():
            self.validation.extend(np.column_stack([steps[keep], val_loss[keep], val_accuracy[keep]]))

    def add_epoch(self, event: EpochEnd) -> bool:
        step = float(event.step)
        val_loss = number(event.val_loss)
        val_accuracy = 100.0 * number(event.val_accuracy)
        if math.isnan(val_loss) and math.isnan(val_accuracy):
            return False
        val = self.validation
        if len(val) and step <= val.last(VAL_STEP):
            val.truncate(int(np.searchsorted(val.column(VAL_STEP), step, side="left")))
        val.append((step, val_loss, val_accuracy))
        return True

    def truncate_after(self, step: float) -> None:
        """Drop every point after ``step``."""
        self.steps.truncate(int(np.searchsorted(self.steps.column(STEP), step, side="right")))
        val = self.validation
        val.truncate(int(np.searchsorted(val.column(VAL_STEP), step, side="right")))
        self._recompute_ema()

    def set_smoothing(self, smoothing: float) -> None:
        if smoothing != self.smoothing:
            self._loss_ema = Ema(smoothing)
            self._accuracy_ema = Ema(smoothing)
            self._recompute_ema()

    def _recompute_ema(self) -> None:
        """Rebuild the smoothed columns and leave the EMA state at the last point."""
        data = self.steps.data
        for raw, smoothed, state in ((LOSS, LOSS_EMA, self._loss_ema),
                                     (ACCURACY, ACCURACY_EMA, self._accuracy_ema)):
            state.reset()
            data[:, smoothed] = [state.update(v) for v in data[:, raw].tolist()]

    def summary(self, step: int | None = None) -> str:
        """The latest values, one line. ``step``: the step to name (the run's progress, which the
        progress line names too); by default the last point's."""
        if not len(self.steps):
            return "No training steps yet"
        parts = [f"step {int(self.steps.last(STEP)) if step is None else step:,}"]
        for label, col, fmt in (("smoothed loss", LOSS_EMA, "{:.4f}"), ("smoothed accuracy", ACCURACY_EMA, "{:.1f}%"),
                                ("learning rate", LR, "{:.3g}")):
            value = self.steps.last(col)
            if not math.isnan(value):
                parts.append(f"{label} {fmt.format(value)}")
        if len(self.validation):
            loss, acc = self.validation.last(VAL_LOSS), self.validation.last(VAL_ACCURACY)
            if not math.isnan(loss):
                parts.append(f"val loss {loss:.4f}")
            if not math.isnan(acc):
                parts.append(f"val accuracy {acc:.1f}%")
        return "  ·  ".join(parts)
