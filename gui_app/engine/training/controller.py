"""The controller of one training run (Orbit's controller/trainer split): one outer loop for
every strategy. It runs epochs as step groups through a step runner (engine/training/steps.py),
validates at each epoch's end, obeys stop and pause, and ends with the model's file and the
test set's evaluation; everything else happens in its actions (engine/training/actions/), called
in order after each group and at each epoch's end: the NaN guard, the events, TensorBoard, the
checkpoints, and whatever a caller adds (the parameter servers' watch).

A step group (one ``tf.function`` call of K steps) is cut shorter when steps are slow, so that a
stop (the window went away, SIGTERM) is noticed within about ``GROUP_SECONDS``, not after 1000
steps; a cluster's groups are never cut (every worker must run the same collectives).
"""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Sequence

import numpy as np

from gui_app.core import atomic_io, rundir
from gui_app.core.gpu_monitor import GpuMonitor
from gui_app.core.metrics import mean_or_none
from gui_app.engine.run.control import RunControl
from gui_app.engine.run.event_writer import EventWriter
from gui_app.engine.training.actions.base import Action, EpochSummary, StepGroup
from gui_app.engine.training.actions.checkpoints import Checkpoints
from gui_app.engine.training.actions.gpu_sampler import GpuSampler
from gui_app.engine.training.actions.nan_guard import NanGuard
from gui_app.engine.training.actions.run_events import RunEvents
from gui_app.engine.training.actions.tensorboard import TensorBoard
from gui_app.engine.training.context import ModelState, RunContext
from gui_app.engine.training.evaluation import Evaluator
from gui_app.engine.training.final_evaluation import evaluate_test_set
from gui_app.engine.training.replay import Replayer
from gui_app.engine.training.steps import StepRunner

GROUP_SECONDS = 2.0
# Tests only (tests/engine/test_rehearse.py): a resumed run starts its epoch from the first batch,
# the classic lost data position, so that ``rehearse`` is seen to catch it. No user sets it.
LOSE_DATA_POSITION_ENV = "REPLICA_STUDIO_TEST_LOSE_DATA_POSITION"


def standard_actions(ctx: RunContext, state: ModelState, run_dir: Path, events: EventWriter, control: RunControl,
                     extra: Sequence[Action] = ()) -> list[Action]:
    """Every run's actions in their order: the NaN guard first (of a diverged group only the finite
    steps before the NaN are told, with a ``non_finite`` event; nothing is saved), ``extra`` just
    before the checkpoints (a failure it finds must not be saved). Both the guard and the
    checkpoints' weight check replay the last steps after a trip (engine/training/replay.py): in a
    cluster the chief does (it writes the events), the other workers wait for it."""
    gpus = GpuSampler(GpuMonitor(), ctx.built)
    replayer = Replayer(ctx, state, chief=bool(getattr(ctx.strategy.extended, "should_checkpoint", True)))
    checkpoints = Checkpoints(state, events, control, ctx.config.training,
                              agreed=ctx.built.num_workers > 1 and ctx.built.coordinator is None, replayer=replayer)
    told = RunEvents(events, gpus)
    guard = NanGuard(state, told, gradients=not ctx.config.training.mixed_precision, replayer=replayer)
    return [guard, gpus, told, TensorBoard(run_dir), *extra, checkpoints]


class RunController:
    def __init__(self, ctx: RunContext, state: ModelState, steps: StepRunner, evaluator: Evaluator,
                 control: RunControl, actions: Sequence[Action]):
        self.ctx, self.state, self.steps, self.evaluator = ctx, state, steps, evaluator
        self.control, self.actions = control, list(actions)

    def run(self, run_dir: Path, events: EventWriter) -> str:
        """Train to the planned step count; a completed run then saves its model and evaluates the
        test set. Returns ``completed`` or ``stopped``; the actions are closed however it ends."""
        try:
            status = self.train()
            if status == "completed":
                with atomic_io.atomic_path(run_dir / rundir.MODEL_FILE) as tmp:
                    self.state.model.save(tmp)
                evaluate_test_set(self.evaluator, self.ctx.input, run_dir, events)
        finally:
            self._each("close")
        return status

    def train(self) -> str:
        """Train to the planned step count; returns ``completed`` or ``stopped``."""
        spe, total = self.ctx.steps_per_epoch, self.ctx.total_steps
        step = self.state.steps_done()
        per_step = None  # seconds per step, measured after the first (tracing) call
        calls = 0
        lose_position = step > 0 and os.environ.get(LOSE_DATA_POSITION_ENV) == "1"
        try:
            while step < total:
                epoch, start_batch = divmod(step, spe)
                if lose_position:
                    start_batch, lose_position = 0, False
                epoch_end = (epoch + 1) * spe
                self.steps.start_epoch(epoch, start_batch)
                started, losses, accuracies = time.perf_counter(), [], []
                while step < epoch_end:
                    self._pause_if_asked(step)
                    if self.control.stop_requested:
                        self._each("on_stop", step)
                        return "stopped"
                    stats = self.steps.run(self._group_size(epoch_end - step, per_step))
                    calls += 1
                    if calls > 1:
                        per_step = stats.seconds / stats.k
                    self.state.step.assign_add(stats.k)
                    group = StepGroup(stats, step, epoch, self._learning_rates(step, stats.k))
                    self._each("on_steps", group)
                    losses += stats.totals[0].tolist()
                    accuracies += stats.totals[1].tolist()
                    step = group.last_step
                self._end_epoch(epoch, step, losses, accuracies, time.perf_counter() - started)
        finally:
            self.steps.close()
        return "completed"

    def _each(self, hook: str, *args) -> None:
        for action in self.actions:
            getattr(action, hook)(*args)

    def _pause_if_asked(self, step: int) -> None:
        if self.control.paused and not self.control.stop_requested:
            self._each("on_pause", step)
            while not self.control.wait_while_paused(0.5):
                pass
            if not self.control.stop_requested:
                self._each("on_continue", step)

    def _group_size(self, remaining: int, per_step: float | None) -> int:
        k = min(self.steps.group_limit, remaining)
        if per_step and not self.steps.fixed_groups:
            k = min(k, max(1, int(GROUP_SECONDS / per_step)))
        return k

    def _learning_rates(self, first_step: int, k: int) -> np.ndarray:
        steps = np.arange(first_step, first_step + k, dtype=np.float32)
        rates = np.asarray(self.state.schedule(steps), dtype=np.float64)
        return np.broadcast_to(rates, (k,))  # a constant schedule returns one scalar

    def _end_epoch(self, epoch: int, step: int, losses: list[float], accuracies: list[float],
                   duration: float) -> None:
        val_loss = val_accuracy = None
        validation = self.ctx.input.validation(self.evaluator.strategy)
        if validation is not None:
            result = self.evaluator.evaluate(validation)
            val_loss, val_accuracy = result.loss, result.accuracy
        self._each("on_epoch_end", EpochSummary(epoch, step, mean_or_none(losses), mean_or_none(accuracies),
                                                val_loss, val_accuracy, duration))
