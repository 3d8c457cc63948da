"""The controller of one training run (Orbit's shape): runs step groups through the
:class:`~gui_app.core.training.loop.Trainer`, turns their statistics into events, validates at epoch
ends, writes checkpoints and TensorBoard summaries, obeys stop/pause, and evaluates at the end.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from gui_app.core import atomic_io, rundir
from gui_app.core.events import decode
from gui_app.core.gpu_monitor import GpuMonitor
from gui_app.core.training.loop import ACCURACY, EXAMPLES, GRAD_NORM, LOSS, STEP_TIME, summarize_step
from gui_app.core.training.retire import retire
from gui_app.engine.context import RunContext
from gui_app.engine.control import Control
from gui_app.engine.errors import TrainingDiverged
from gui_app.engine.events import EventWriter

MISCLASSIFIED_KEEP = 64
# A step group (one tf.function call) is cut shorter when steps are slow, so that a stop (the
# window went away, SIGTERM) is noticed within about this many seconds, not after 1000 steps.
GROUP_SECONDS = 2.0


def _memory(built) -> list[tuple[int | None, int | None]]:
    """(in use, peak) bytes per replica device; (None, None) where TensorFlow cannot tell (CPUs)."""
    import tensorflow as tf

    out = []
    local = set(getattr(built, "local_devices", built.devices))
    for device in built.devices:
        short = device.split("device:")[-1]
        if not short.startswith("GPU") or device not in local:  # another worker's GPU: it reports nothing here
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
        self.trainer = Trainer(ctx.strategy, ctx.model, ctx.optimizer, cfg.global_batch_size, logits,
                               accumulation_steps=cfg.accumulation_steps,
                               all_reduce_dtype=ctx.config.strategy.all_reduce_dtype)
        self.evaluator = Evaluator(ctx.strategy, ctx.model, ctx.dataset.num_classes, logits)
        self._start_bookkeeping()

    def _start_bookkeeping(self) -> None:
        """What every controller keeps besides its trainer (the parameter-server one too)."""
        self._writers = None
        self._last_checkpoint = time.monotonic()
        # Utilisation, temperature and power of the GPUs from NVML, sampled off this thread;
        # nothing starts without an NVIDIA driver (not run on a GPU here: core/gpu_monitor.py).
        self._gpus = GpuMonitor()
        if any("GPU" in d for d in self.ctx.built.devices):
            self._gpus.start()

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
        self._last_checkpoint = time.monotonic()
        self.events.emit("checkpoint", step=step, path=path)
        self.events.sync()  # the history up to a checkpoint is as durable as the checkpoint

    def _checkpoint_due(self, before: int, step: int) -> bool:
        cfg = self.ctx.config.training
        every, minutes = cfg.checkpoint_every_steps, cfg.checkpoint_every_minutes
        if self.control.take_checkpoint_request():
            return True
        if every and before // every != step // every:
            return True
        if not (minutes and time.monotonic() - self._last_checkpoint >= 60 * minutes):
            return False
        if getattr(self.ctx.built, "num_workers", 1) > 1:
            # Every worker must save together, and each has its own clock: ask, and the workers
            # agree at the next step group (engine/cluster/agreement.py) like a `checkpoint` word.
            self.control.command("checkpoint")
            self._last_checkpoint = time.monotonic()
            return False
        return True

    def _group_size(self, remaining: int, per_step: float | None) -> int:
        k = min(self.ctx.config.training.steps_per_call, remaining)
        # Workers of a cluster must run the same steps per call (a group is collectives all
        # workers join), and each measures its own speed: only a single process shortens it.
        if per_step and getattr(self.ctx.built, "num_workers", 1) <= 1:
            k = min(k, max(1, int(GROUP_SECONDS / per_step)))
        return k

    def _learning_rates(self, first_step: int, k: int) -> np.ndarray:
        steps = np.arange(first_step, first_step + k, dtype=np.float32)
        rates = np.asarray(self.ctx.schedule(steps), dtype=np.float64)
        return np.broadcast_to(rates, (k,))  # a constant schedule returns one scalar

    def _emit_steps(self, stats: np.ndarray, first_step: int, epoch: int, seconds: float,
                    input_wait: np.ndarray | None = None) -> None:
        k, replicas, _ = stats.shape
        lrs = self._learning_rates(first_step, k)
        memory = _memory(self.ctx.built)
        devices = self.ctx.built.devices
        workers = self.ctx.built.replica_workers
        per_step = seconds / k
        tags = ("loss", "accuracy", "learning_rate") + tuple(
            f"replica_{r}/{name}" for r in range(replicas) for name in ("loss", "grad_norm"))
        rows_out = np.empty((k, len(tags)), np.float32)
        gpus = {"gpus": self._gpus.latest()} if self._gpus.latest() else {}
        for i in range(k):
            rows = stats[i]
            loss, acc = summarize_step(rows)
            examples = float(rows[:, EXAMPLES].sum())
            replicas_out = [{
                "replica": r, "worker": workers[r], "device": devices[r], "loss": float(rows[r, LOSS]),
                "accuracy": float(rows[r, ACCURACY]), "examples": int(rows[r, EXAMPLES]),
                "grad_norm": float(rows[r, GRAD_NORM]), "step_time": float(rows[r, STEP_TIME]),
                "examples_per_sec": float(rows[r, EXAMPLES] / rows[r, STEP_TIME]) if rows[r, STEP_TIME] > 0 else None,
                "memory_bytes": memory[r][0], "peak_memory_bytes": memory[r][1],
            } for r in range(replicas)]
            step = first_step + i + 1
            waited = None if input_wait is None else float(input_wait[i])
            # Where the step's time went (Step.time_split): what the slowest replica's pass and the
            # wait for data leave of the wall time is the all-reduce, the optimizer and the host.
            split = decode({"type": "step", "step": step, "step_time": per_step, "replicas": replicas_out,
                            "input_wait": waited}).time_split()
            self.events.emit("step", step=step, epoch=epoch + 1, loss=loss, accuracy=acc,
                             learning_rate=float(lrs[i]), examples_per_sec=examples / per_step,
                             step_time=per_step, replicas=replicas_out, input_wait=waited,
                             allreduce_time=None if split is None else split[2], **gpus)
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
                self.events.emit("continued", step=step)

    # ---- the run --------------------------------------------------------------------------
    def train(self) -> str:
        """Train to the planned step count; returns ``completed`` or ``stopped``."""
        from gui_app.core.training import pipeline

        ctx, cfg = self.ctx, self.ctx.config.training
        spe, total = ctx.steps_per_epoch, ctx.total_steps
        splits = ctx.splits
        step = int(ctx.step.numpy())
        per_step = None  # seconds per step, measured after the first (tracing) call
        calls = 0
        iterator = None
        while step < total:
            epoch, start_batch = divmod(step, spe)
            epoch_end = (epoch + 1) * spe
            retire(iterator)  # deleting the last epoch's iterator here cost seconds (retire.py)
            if ctx.stream is not None:
                from gui_app.engine import stream_input

                iterator = stream_input.train_iterator(ctx, self.run_dir, epoch, start_batch)
            else:
                iterator = iter(pipeline.distribute_train(ctx.strategy, splits.x_train, splits.y_train, epoch,
                                                          start_batch, cfg.global_batch_size, ctx.data_seed))
            started, losses, accs = time.perf_counter(), [], []
            while step < epoch_end:
                self._pause_if_asked(step)
                if self.control.stop_requested:
                    self.save_checkpoint()
                    retire(iterator)
                    return "stopped"
                k = self._group_size(epoch_end - step, per_step)
                t0 = time.perf_counter()
                stats = self.trainer.train(iterator, k)
                seconds = time.perf_counter() - t0
                calls += 1
                if calls > 1:
                    per_step = seconds / k
                ctx.step.assign_add(k)
                if not np.all(np.isfinite(stats[:, :, LOSS])):
                    bad = step + 1 + int(np.argmax(~np.isfinite(stats[:, :, LOSS]).all(axis=1)))
                    raise TrainingDiverged(f"the loss became NaN or infinite at step {bad}; "
                                           "try a lower training.learning_rate (the last good checkpoint is kept)")
                self._emit_steps(stats, step, epoch, seconds, getattr(self.trainer, "last_input_wait", None))
                for rows in stats:
                    loss, acc = summarize_step(rows)
                    losses.append(loss)
                    accs.append(acc)
                before, step = step, step + k
                if self._checkpoint_due(before, step):
                    self.save_checkpoint()
            self._end_epoch(epoch, step, losses, accs, time.perf_counter() - started)
        retire(iterator)
        return "completed"

    def _end_epoch(self, epoch: int, step: int, losses: list, accs: list, duration: float) -> None:
        from gui_app.core.training import pipeline

        splits, batch = self.ctx.splits, self.ctx.config.training.global_batch_size
        val_loss = val_acc = None
        if splits.x_val is not None:
            if self.ctx.stream is not None:
                from gui_app.engine import stream_input

                val = stream_input.eval_dataset(self.ctx, "val")
            else:
                val = pipeline.distribute_eval(self.ctx.strategy, splits.x_val, splits.y_val, batch)
            result = self.evaluator.evaluate(val)
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
        if ctx.stream is not None:
            from gui_app.engine import stream_input

            test = stream_input.eval_dataset(ctx, "test")
        else:
            test = pipeline.distribute_eval(ctx.strategy, x, y, ctx.config.training.global_batch_size)
        result = self.evaluator.evaluate(test, keep_predictions=True)
        event = result.to_event(ctx.dataset.class_names)
        atomic_io.write_text(self.run_dir / rundir.EVAL_FILE, json.dumps(event))
        if result.predictions is not None and ctx.stream is not None:
            y, wrong, x_wrong = stream_input.test_examples(ctx, result.predictions, MISCLASSIFIED_KEEP)
            with atomic_io.atomic_path(self.run_dir / rundir.MISCLASSIFIED_FILE) as tmp:
                np.savez_compressed(tmp, x=x_wrong, y_true=y[wrong], y_pred=result.predictions[wrong],
                                    confidence=result.confidence[wrong], index=wrong)
        elif result.predictions is not None:
            wrong = np.flatnonzero(result.predictions != y)[:MISCLASSIFIED_KEEP]
            with atomic_io.atomic_path(self.run_dir / rundir.MISCLASSIFIED_FILE) as tmp:
                np.savez_compressed(tmp, x=x[wrong], y_true=y[wrong], y_pred=result.predictions[wrong],
                                    confidence=result.confidence[wrong], index=wrong)
        return self.events.emit("eval", **event)

    def save_model(self) -> Path:
        path = self.run_dir / rundir.MODEL_FILE
        with atomic_io.atomic_path(path) as tmp:
            self.ctx.model.save(tmp)
        return path

    def close(self) -> None:
        self._gpus.stop()
        if self._writers:
            for w in self._writers:
                w.close()

