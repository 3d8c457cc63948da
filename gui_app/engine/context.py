"""What every engine command sets up before it trains or evaluates: the runtime, the data,
the strategy, and the model with its optimizer and checkpoint, in the order TensorFlow needs.
"""
from __future__ import annotations

import platform
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from gui_app.core.config import ConfigError, RunConfig
from gui_app.core.rundir import CHECKPOINT_DIR


class InputError(ValueError):
    """Bad input (dataset, model file) detected while setting up: exit code 2."""


def versions() -> dict[str, str]:
    import keras
    import tensorflow as tf

    return {"tensorflow": tf.__version__, "keras": keras.__version__, "python": platform.python_version()}


@dataclass
class RunContext:
    config: RunConfig
    dataset: Any  # gui_app.core.datasets.Dataset
    splits: Any  # gui_app.core.training.pipeline.Splits
    built: Any  # gui_app.core.training.strategies.BuiltStrategy
    data_seed: int
    warnings: list[str] = field(default_factory=list)
    model: Any = None
    optimizer: Any = None
    step: Any = None  # tf.Variable(int64): global steps done
    checkpoint: Any = None
    manager: Any = None
    schedule: Any = None  # the learning-rate schedule: step -> rate
    seed_var: Any = None  # tf.Variable holding data_seed, saved in the checkpoint

    @property
    def strategy(self):
        return self.built.strategy

    @property
    def steps_per_epoch(self) -> int:
        return len(self.splits.x_train) // self.config.training.global_batch_size

    @property
    def total_steps(self) -> int:
        return self.steps_per_epoch * self.config.training.epochs


def prepare(config: RunConfig, progress: Callable[[dict], None] | None = None,
            data_seed: int | None = None) -> RunContext:
    """Configure TensorFlow, check devices, load and split the data, build the strategy.

    Must be the first TensorFlow work of the process (logical devices are fixed at start-up).
    """
    from gui_app.core.training import devices, pipeline, strategies
    from gui_app.core.datasets import DatasetError, load_dataset

    warnings = devices.configure_runtime(config.runtime)
    devices.check_devices(config)
    if config.training.mixed_precision:
        import keras

        keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        dataset = load_dataset(config.dataset, progress)
    except DatasetError as exc:
        raise InputError(str(exc)) from None
    warnings += list(dataset.warnings)
    # Without a seed, draw one: it is stored in the checkpoint so a resume sees the same data order.
    # (The workers of one cluster get the launcher's draw, so that they all read the same order.)
    if data_seed is None:
        data_seed = config.training.seed if config.training.seed is not None else random.randrange(2**31)
    try:
        splits = pipeline.split(dataset, config.dataset)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    batch = config.training.global_batch_size
    if len(splits.x_train) < batch:
        raise ConfigError(f"training.global_batch_size: {batch} is larger than the {len(splits.x_train)} "
                          "training examples")
    built = strategies.build_strategy(config.strategy)
    if batch < built.num_replicas:
        raise ConfigError(f"training.global_batch_size: {batch} is smaller than the {built.num_replicas} replicas")
    warnings += built.warnings
    if batch % built.num_replicas:
        warnings.append(f"training.global_batch_size: {batch} does not divide evenly over {built.num_replicas} "
                        "replicas; local batches differ by one example")
    return RunContext(config, dataset, splits, built, data_seed, warnings)


def build_model_state(ctx: RunContext, run_dir: Path | None) -> None:
    """Create model, optimizer, step counter and checkpoint manager inside the strategy scope."""
    import keras
    import tensorflow as tf

    from gui_app.core.training.models import ModelError, build_model, channel_stats
    from gui_app.core.training.optim import build_optimizer, make_schedule

    cfg = ctx.config
    if cfg.training.seed is not None:
        keras.utils.set_random_seed(cfg.training.seed)  # same initial weights for the same seed
    with ctx.strategy.scope():
        try:
            ctx.model = build_model(cfg.model, ctx.dataset.input_shape, ctx.dataset.num_classes,
                                    cfg.training.mixed_precision, channel_stats(ctx.splits.x_train))
        except ModelError as exc:
            raise InputError(str(exc)) from None
        ctx.schedule = make_schedule(cfg.training, ctx.steps_per_epoch, ctx.total_steps)
        ctx.optimizer = build_optimizer(cfg.training, ctx.schedule)
        ctx.step = tf.Variable(0, dtype=tf.int64, trainable=False, name="global_step")
        seed_var = tf.Variable(ctx.data_seed, dtype=tf.int64, trainable=False, name="data_seed")
        ctx.checkpoint = tf.train.Checkpoint(model=ctx.model, optimizer=ctx.optimizer, step=ctx.step,
                                             data_seed=seed_var)
        ctx.seed_var = seed_var
    if run_dir is not None:
        ctx.manager = tf.train.CheckpointManager(ctx.checkpoint, str(run_dir / CHECKPOINT_DIR), max_to_keep=3,
                                                 step_counter=ctx.step)


def restore_latest(ctx: RunContext) -> bool:
    """Restore the newest checkpoint; False when there is none."""
    latest = ctx.manager.latest_checkpoint if ctx.manager else None
    if not latest:
        return False
    ctx.checkpoint.restore(latest).expect_partial()
    ctx.data_seed = int(ctx.seed_var.numpy())
    return True
