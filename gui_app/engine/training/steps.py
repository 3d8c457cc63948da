"""Step runners: the steps of every strategy, returned as the same per-step statistics.

Default, one-device, mirrored and multi-worker training run the same
:class:`~gui_app.engine.training.loop.Trainer`: K steps per ``tf.function`` call, one row of
statistics per replica and step (docs/architecture.md, "The training loop"). Parameter-server
training schedules steps on whichever worker is free (engine/training/ps_loop.py): one row per
step, saying which worker ran it. Either way the run controller gets a :class:`StepStats`.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from functools import cached_property
from typing import Protocol, Sequence

import numpy as np

from gui_app.engine.training.context import ModelState, RunContext
from gui_app.engine.training.evaluation import Evaluator
from gui_app.engine.training.inputs import InputSource
from gui_app.engine.training.loop import EXAMPLES, LOSS, Trainer, summarize_step
from gui_app.engine.training.ps_loop import WORKER, PSTrainer
from gui_app.engine.training.strategies import BuiltStrategy


@dataclass(frozen=True)
class Row:
    """Where one row of a step's statistics was computed."""

    replica: int
    worker: int  # -1: a parameter-server step whose worker is unknown
    device: str | None


@dataclass(frozen=True)
class StepStats:
    """The statistics of k steps: ``values[i, j]`` holds the ``core.training.loop.STATS`` of
    row ``rows[i][j]`` of step i (a replica, or the parameter-server worker that ran it)."""

    values: np.ndarray  # [k, rows, STATS]
    rows: Sequence[Sequence[Row]]  # [k][rows]
    seconds: float  # wall time of the k steps
    input_wait: np.ndarray | None = None  # [k] seconds each step waited for its batch
    per_worker: bool = False  # parameter servers: each step ran on one worker
    batches: np.ndarray | None = None  # [k, rows] each row's batch fingerprint (training.batch_fingerprints)

    @property
    def k(self) -> int:
        return len(self.values)

    @cached_property
    def totals(self) -> tuple[np.ndarray, np.ndarray]:
        """(loss, accuracy) of each step over its rows, each row weighted by its example count."""
        pairs = np.array([summarize_step(rows) for rows in self.values], np.float64).reshape(-1, 2)
        return pairs[:, 0], pairs[:, 1]

    def examples(self, i: int) -> float:
        return float(self.values[i, :, EXAMPLES].sum())

    def first_non_finite(self) -> int | None:
        """The index of the first step with a NaN or infinite loss in any row, or None."""
        bad = ~np.isfinite(self.values[:, :, LOSS]).all(axis=1)
        return int(np.argmax(bad)) if bad.any() else None


class StepRunner(Protocol):
    group_limit: int  # the most steps one group may run
    fixed_groups: bool  # every group runs group_limit steps (clusters); else cut to the clock

    def start_epoch(self, epoch: int, start_batch: int) -> None: ...

    def run(self, k: int) -> StepStats: ...

    def close(self) -> None: ...


class SyncSteps:
    """Default, one-device, mirrored and multi-worker training: the Trainer's K steps per call
    on an epoch's iterator from the input source."""

    def __init__(self, trainer: Trainer, source: InputSource, built: BuiltStrategy, seed: int, steps_per_call: int):
        self.trainer, self.source, self.strategy, self.seed = trainer, source, built.strategy, seed
        self.group_limit = steps_per_call
        # The workers of a cluster must run the same steps per call (a group is collectives all
        # workers join), and each measures its own speed: only a single process cuts groups short.
        self.fixed_groups = built.num_workers > 1
        self._rows = [Row(r, w, d) for r, (w, d) in enumerate(zip(built.replica_workers, built.devices))]
        self._iterator = None

    def start_epoch(self, epoch: int, start_batch: int) -> None:
        from gui_app.engine.training.retire import retire

        retire(self._iterator)  # deleting the last epoch's iterator here cost seconds (retire.py)
        self._iterator = iter(self.source.train(self.strategy, epoch, start_batch, self.seed))

    def run(self, k: int) -> StepStats:
        started = time.perf_counter()
        values = self.trainer.train(self._iterator, k)
        return StepStats(values, [self._rows] * k, time.perf_counter() - started, self.trainer.last_input_wait,
                         batches=self.trainer.last_batches)

    def close(self) -> None:
        from gui_app.engine.training.retire import retire

        retire(self._iterator)
        self._iterator = None


class ScheduledSteps:
    """Parameter-server training: steps scheduled one at a time on free workers, each reading
    its own endless dataset (an epoch is a number of steps)."""

    fixed_groups = True

    def __init__(self, trainer: PSTrainer, source: InputSource, built: BuiltStrategy, steps_per_call: int):
        self.trainer = trainer
        self.group_limit = steps_per_call * max(1, built.num_workers)  # every worker busy between two joins
        self._devices = built.devices
        self._iterator = source.per_worker(built.coordinator)

    def start_epoch(self, epoch: int, start_batch: int) -> None:
        pass  # the per-worker datasets repeat for the whole run

    def run(self, k: int) -> StepStats:
        started = time.perf_counter()
        values = self.trainer.train(self._iterator, k)  # [k, STATS + worker]
        seconds = time.perf_counter() - started
        rows = []
        for w in values[:, WORKER].astype(int):
            device = self._devices[w] if 0 <= w < len(self._devices) else None
            rows.append([Row(max(int(w), 0), int(w), device)])
        return StepStats(values[:, np.newaxis, :WORKER], rows, seconds, per_worker=True)

    def close(self) -> None:
        pass


def step_runner(ctx: RunContext, state: ModelState) -> StepRunner:
    """The step runner of the run's strategy."""
    from gui_app.engine.training.models import outputs_logits

    cfg, built = ctx.config.training, ctx.built
    logits = outputs_logits(state.model)
    if built.coordinator is not None:
        scheduled = PSTrainer(built.strategy, built.coordinator, state.model, state.optimizer, cfg.global_batch_size,
                              logits)
        return ScheduledSteps(scheduled, ctx.input, built, cfg.steps_per_call)
    trainer = Trainer(built.strategy, state.model, state.optimizer, cfg.global_batch_size, logits,
                      accumulation_steps=cfg.accumulation_steps, all_reduce_dtype=ctx.config.strategy.all_reduce_dtype,
                      fingerprints=cfg.batch_fingerprints)
    return SyncSteps(trainer, ctx.input, built, ctx.data_seed, cfg.steps_per_call)


def evaluator(ctx: RunContext, state: ModelState) -> Evaluator:
    """The distributed Evaluator of the run. Under parameter servers, validation and the test run
    on the coordinator, reading the variables from the ps tasks (TensorFlow's "inline evaluation"):
    the training strategy cannot iterate datasets there."""
    import tensorflow as tf

    from gui_app.engine.training.models import outputs_logits

    strategy = tf.distribute.get_strategy() if ctx.built.coordinator is not None else ctx.strategy
    return Evaluator(strategy, state.model, ctx.input.num_classes, outputs_logits(state.model))
