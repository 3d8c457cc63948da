"""The controller of one training run (Orbit's shape): runs step groups through the
:class:`~gui_app.core.training.loop.Trainer`, turns their statistics into events, validates at epoch
ends, writes checkpoints and TensorBoard summaries, obeys stop/pause, and evaluates at the end.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from gui_app.core import rundir
from gui_app.core.training.loop import ACCURACY, EXAMPLES, GRAD_NORM, LOSS, STEP_TIME, summarize_step
from gui_app.core.training.retire import retire
from gui_app.engine.context import RunContext
from gui_app.engine.control import Control
from gui_app.engine.events import EventWriter

MISCLASSIFIED_KEEP = 64


class TrainingDiverged(RuntimeError):
    """The loss became NaN or infinite."""


def _memory(built) -> list[tuple[int | None, int | None]]:
    """(in use, peak) bytes per replica device; (None, None) where TensorFlow cannot tell (CPUs)."""
    import tensorflow as tf

    out = []
    for device in built.devices:
        short = device.split("device:")[-1]
        if not short.startswith("GPU"):
            out.append((None, None))
            continue
        try:
            info = tf.config.experimental.get_memory_info(short)
            out.append((int(info["current"]), int(info["peak"])))
        except (ValueError, RuntimeError):
            out.append((None, None))
    return out


class RunController:
    def __init__(self, ctx: RunContext, run_dir: Path, events: EventWriter, control: Control):
        from gui_app.core.training.evaluation import Evaluator
        from gui_app.core.training.loop import Trainer
        from gui_app.core.training.models import outputs_logits

        self.ctx, self.run_dir, self.events, self.control = ctx, run_dir, events, control
        cfg = ctx.config.training
        logits = outputs_logits(ctx.model)
        self.trainer = Trainer(ctx.strategy, ctx.model, ctx.optimizer, cfg.global_batch_size, logits)
        self.evaluator = Evaluator(ctx.strategy, ctx.model, ctx.dataset.num_classes, logits)
        self._writers = None

    # ---- helpers ------------------------------------------------------------------------
    def _tensorboard(self):
        from gui_app.core.training.tensorboard import ScalarWriter

        if self._writers is None:
            base = self.run_dir / rundir.TENSORBOARD_DIR
            self._writers = (ScalarWriter(base / "train"), ScalarWriter(base / "validation"))
        return self._writers

    def save_checkpoint(self) -> None:
        step = int(self.ctx.step.numpy())
        path = self.ctx.manager.save(checkpoint_number=step)
        self.events.emit("checkpoint", step=step, path=path)

    def _learning_rates(self, first_step: int, k: int) -> np.ndarray:
        steps = np.arange(first_step, first_step + k, dtype=np.float32)
        rates = np.asarray(self.ctx.schedule(steps), dtype=np.float64)
        return np.broadcast_to(rates, (k,))  # a constant schedule returns one scalar

    def _emit_steps(self, stats: np.ndarray, first_step: int, epoch: int, seconds: float) -> None:
        k, replicas, _ = stats.shape
        lrs = self._learning_rates(first_step, k)
        memory = _memory(self.ctx.built)
        devices = self.ctx.built.devices
        per_step = seconds / k
        tags = ("loss", "accuracy", "learning_rate") + tuple(
            f"replica_{r}/{name}" for r in range(replicas) for name in ("loss", "grad_norm"))
        rows_out = np.empty((k, len(tags)), np.float32)
        for i in range(k):
            rows = stats[i]
            loss, acc = summarize_step(rows)
            examples = float(rows[:, EXAMPLES].sum())
            replicas_out = [{
                "replica": r, "device": devices[r], "loss": float(rows[r, LOSS]),
                "accuracy": float(rows[r, ACCURACY]), "examples": int(rows[r, EXAMPLES]),
                "grad_norm": float(rows[r, GRAD_NORM]), "step_time": float(rows[r, STEP_TIME]),
                "examples_per_sec": float(rows[r, EXAMPLES] / rows[r, STEP_TIME]) if rows[r, STEP_TIME] > 0 else None,
                "memory_bytes": memory[r][0], "peak_memory_bytes": memory[r][1],
            } for r in range(replicas)]
            step = first_step + i + 1
            self.events.emit("step", step=step, epoch=epoch + 1, loss=loss, accuracy=acc,
                             learning_rate=float(lrs[i]), examples_per_sec=examples / per_step,
                             step_time=per_step, replicas=replicas_out)
            rows_out[i, :3] = loss, acc, lrs[i]
            rows_out[i, 3:] = rows[:, [LOSS, GRAD_NORM]].reshape(-1)
        # One graph call per step group, not one eager write per scalar (tensorboard.py).
        self._tensorboard()[0].rows(np.arange(first_step + 1, first_step + k + 1), tags, rows_out)

    def _pause_if_asked(self, step: int) -> None:
        if self.control.paused and not self.control.stop_requested:
            self.events.emit("paused", step=step)
            while not self.control.wait_while_paused(0.5):
                pass
            if not self.control.stop_requested:
                self.events.emit("resumed", step=step)

    # ---- the run --------------------------------------------------------------------------
    def train(self) -> str:
        """Train to the planned step count; returns ``completed`` or ``stopped``."""
        from gui_app.core.training import pipeline

        ctx, cfg = self.ctx, self.ctx.config.training
        spe, total = ctx.steps_per_epoch, ctx.total_steps
        splits = ctx.splits
        step = int(ctx.step.numpy())
        every = cfg.checkpoint_every_steps
        iterator = None
        while step < total:
            epoch, start_batch = divmod(step, spe)
            epoch_end = (epoch + 1) * spe
            retire(iterator)  # deleting the last epoch's iterator here cost seconds (retire.py)
            ds = pipeline.train_dataset(splits.x_train, splits.y_train, epoch, start_batch,
                                        cfg.global_batch_size, ctx.data_seed)
            iterator = iter(ctx.strategy.experimental_distribute_dataset(ds))
            started, losses, accs = time.perf_counter(), [], []
            while step < epoch_end:
                self._pause_if_asked(step)
                if self.control.stop_requested:
                    self.save_checkpoint()
                    retire(iterator)
                    return "stopped"
                k = min(cfg.steps_per_call, epoch_end - step)
                t0 = time.perf_counter()
                stats = self.trainer.train(iterator, k)
                seconds = time.perf_counter() - t0
                ctx.step.assign_add(k)
                if not np.all(np.isfinite(stats[:, :, LOSS])):
                    bad = step + 1 + int(np.argmax(~np.isfinite(stats[:, :, LOSS]).all(axis=1)))
                    raise TrainingDiverged(f"the loss became NaN or infinite at step {bad}; "
                                           "try a lower training.learning_rate (the last good checkpoint is kept)")
                self._emit_steps(stats, step, epoch, seconds)
                for rows in stats:
                    loss, acc = summarize_step(rows)
                    losses.append(loss)
                    accs.append(acc)
                before, step = step, step + k
                if (every and before // every != step // every) or self.control.take_checkpoint_request():
                    self.save_checkpoint()
            self._end_epoch(epoch, step, losses, accs, time.perf_counter() - started)
        retire(iterator)
        return "completed"

    def _end_epoch(self, epoch: int, step: int, losses: list, accs: list, duration: float) -> None:
        from gui_app.core.training import pipeline

        splits, batch = self.ctx.splits, self.ctx.config.training.global_batch_size
        val_loss = val_acc = None
        if splits.x_val is not None:
            result = self.evaluator.evaluate(pipeline.eval_dataset(splits.x_val, splits.y_val, batch))
            val_loss, val_acc = result.loss, result.accuracy
            self._tensorboard()[1].scalars(step, {"loss": val_loss, "accuracy": val_acc})
            self._tensorboard()[1].flush()
        self._tensorboard()[0].flush()
        mean = lambda v: float(np.mean(v)) if v else None  # noqa: E731
        self.events.emit("epoch_end", epoch=epoch + 1, step=step, loss=mean(losses), accuracy=mean(accs),
                         val_loss=val_loss, val_accuracy=val_acc, duration=duration)
        self.save_checkpoint()

    def evaluate(self) -> dict:
        """Distributed evaluation on the test set; writes eval.json and misclassified.npz."""
        from gui_app.core.training import pipeline


        ctx = self.ctx
        x, y = ctx.splits.x_test, ctx.splits.y_test
        result = self.evaluator.evaluate(pipeline.eval_dataset(x, y, ctx.config.training.global_batch_size),
                                         keep_predictions=True)
        event = result.to_event(ctx.dataset.class_names)
        tmp = self.run_dir / (rundir.EVAL_FILE + ".tmp")
        tmp.write_text(json.dumps(event), encoding="utf-8")
        tmp.replace(self.run_dir / rundir.EVAL_FILE)
        if result.predictions is not None:
            wrong = np.flatnonzero(result.predictions != y)[:MISCLASSIFIED_KEEP]
            np.savez_compressed(self.run_dir / rundir.MISCLASSIFIED_FILE, x=x[wrong], y_true=y[wrong],
                                y_pred=result.predictions[wrong], confidence=result.confidence[wrong],
                                index=wrong)
        return self.events.emit("eval", **event)

    def save_model(self) -> Path:
        path = self.run_dir / rundir.MODEL_FILE
        tmp = self.run_dir / ("tmp-" + rundir.MODEL_FILE)
        self.ctx.model.save(tmp)
        tmp.replace(path)
        return path

    def close(self) -> None:
        if self._writers:
            for w in self._writers:
                w.close()

