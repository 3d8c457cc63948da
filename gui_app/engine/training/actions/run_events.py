"""The training loop's events (docs/events.md): ``step`` for every step, with each replica's
own figures (or the worker that ran it), ``epoch_end``, ``paused`` and ``continued``."""
from __future__ import annotations

from gui_app.core.events import Continued, EpochEnd, Paused, ReplicaStats, Step
from gui_app.engine.run.event_writer import EventWriter
from gui_app.engine.training.actions.base import Action, EpochSummary, StepGroup
from gui_app.engine.training.actions.gpu_sampler import GpuSampler
from gui_app.engine.training.loop import ACCURACY, EXAMPLES, GRAD_NORM, LOSS, READY, STEP_TIME


class RunEvents(Action):
    def __init__(self, events: EventWriter, gpus: GpuSampler):
        self.events, self.gpus = events, gpus

    def on_steps(self, group: StepGroup, count: int | None = None) -> None:
        """The group's steps, or its first ``count`` (the finite ones before a NaN: nan_guard.py)."""
        stats = group.stats
        memory, cards = self.gpus.replica_memory(), self.gpus.latest()
        per_step = stats.seconds / stats.k
        losses, accuracies = stats.totals
        for i in range(stats.k if count is None else count):
            replicas = []
            for j, (row, values) in enumerate(zip(stats.rows[i], stats.values[i])):
                in_use, peak = memory[row.replica] if row.replica < len(memory) else (None, None)
                seconds = float(values[STEP_TIME])
                replicas.append(ReplicaStats(
                    replica=row.replica, worker=row.worker, device=row.device, loss=float(values[LOSS]),
                    accuracy=float(values[ACCURACY]), examples=int(values[EXAMPLES]),
                    grad_norm=float(values[GRAD_NORM]), step_time=seconds,
                    examples_per_sec=float(values[EXAMPLES]) / seconds if seconds > 0 else None,
                    memory_bytes=in_use, peak_memory_bytes=peak,
                    batch=None if stats.batches is None else str(stats.batches[i][j]),
                    ready_time=float(values[READY]) if values[READY] >= 0 else None))
            step = Step(step=group.first_step + i + 1, epoch=group.epoch + 1, loss=float(losses[i]),
                        accuracy=float(accuracies[i]), learning_rate=float(group.learning_rates[i]),
                        examples_per_sec=stats.examples(i) / per_step, step_time=per_step, replicas=replicas,
                        gpus=cards, per_worker=stats.per_worker)
            if not stats.per_worker:  # a scheduled step has no all-reduce: its rest is the coordinator's
                step.input_wait = None if stats.input_wait is None else float(stats.input_wait[i])
                # Where the step's time went: what the slowest replica's pass and the wait for data
                # leave of the wall time is the all-reduce, the optimizer and the host.
                split = step.time_split()
                step.allreduce_time = None if split is None else split[2]
            self.events.emit(step)

    def on_epoch_end(self, summary: EpochSummary) -> None:
        self.events.emit(EpochEnd(epoch=summary.epoch + 1, step=summary.step, loss=summary.loss,
                                  accuracy=summary.accuracy, val_loss=summary.val_loss,
                                  val_accuracy=summary.val_accuracy, duration=summary.duration))

    def on_pause(self, step: int) -> None:
        self.events.emit(Paused(step=step))

    def on_continue(self, step: int) -> None:
        self.events.emit(Continued(step=step))
