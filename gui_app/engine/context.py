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
from gui_app.engine.errors import InputError


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
    stream: Any = None  # a StreamSource when dataset.loading streams (engine/stream_input.py)
    train_stream: Any = None
    eval_cache: Any = None

    @property
    def strategy(self):
        return self.built.strategy

    @property
    def steps_per_epoch(self) -> int:
        return len(self.splits.x_train) // self.config.training.global_batch_size

    @property
    def total_steps(self) -> int:
        return self.steps_per_epoch * self.config.training.epochs


NUMPY_DATASETS = ("digits", "mnist", "fashion_mnist", "cifar10", "cifar100", "npz", "idx")


def _load(config: RunConfig, progress):
    from gui_app.core.datasets import DatasetError, load_dataset

    try:
        return load_dataset(config.dataset, progress)
    except DatasetError as exc:
        raise InputError(str(exc)) from None


def prepare(config: RunConfig, progress: Callable[[dict], None] | None = None,
            data_seed: int | None = None) -> RunContext:
    """Configure TensorFlow, check devices, load and split the data, build the strategy.

    Must be the first TensorFlow work of the process (logical devices are fixed at start-up).
    """
    from gui_app.core.datasets import DatasetError
    from gui_app.core.training import devices, pipeline, strategies

    # Datasets read with numpy alone are checked before TensorFlow starts (about 3 s): a bad
    # file is refused at once. image_folder decodes with TensorFlow, so it waits for the runtime.
    dataset = _load(config, progress) if config.dataset.name in NUMPY_DATASETS else None
    stream = None
    warnings = devices.configure_runtime(config.runtime)
    devices.check_devices(config)
    if config.training.mixed_precision:
        import keras

        keras.mixed_precision.set_global_policy("mixed_float16")
    if dataset is None:  # image folders, TFRecord shards, TFDS: in memory or streamed (dataset.loading)
        from gui_app.core.datasets.loading import open_input

        try:
            dataset, stream = open_input(config.dataset, progress)
        except DatasetError as exc:
            raise InputError(str(exc)) from None
        dataset = dataset if stream is None else stream
    warnings += list(dataset.warnings)
    # Without a seed, draw one: it is stored in the checkpoint so a resume sees the same data order.
    # (The workers of one cluster get the launcher's draw, so that they all read the same order.)
    if data_seed is None:
        data_seed = config.training.seed if config.training.seed is not None else random.randrange(2**31)
    try:
        if stream is not None:
            from gui_app.engine.stream_input import splits_for

            splits = splits_for(stream)
        else:
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
    micro = config.training.accumulation_steps
    if batch // built.num_replicas < micro:
        raise ConfigError(f"training.accumulation_steps: {micro} micro-batches do not fit the "
                          f"{batch // built.num_replicas} examples per replica of {built.num_replicas} replicas")
    if batch % built.num_replicas:
        warnings.append(f"training.global_batch_size: {batch} does not divide evenly over {built.num_replicas} "
                        "replicas; local batches differ by one example")
    return RunContext(config, dataset, splits, built, data_seed, warnings, stream=stream)


def build_model_state(ctx: RunContext, run_dir: Path | None) -> None:
    """Create model, optimizer, step counter and checkpoint manager inside the strategy scope."""
    import keras
    import tensorflow as tf

    from gui_app.core.training.models import ModelError, build_model, channel_stats
    from gui_app.core.training.optim import build_optimizer, make_schedule

    cfg = ctx.config
    if ctx.stream is not None:
        from gui_app.engine.stream_input import stats_sample

        train_images = stats_sample(ctx)
    else:
        train_images = ctx.splits.x_train
    if cfg.training.seed is not None:
        keras.utils.set_random_seed(cfg.training.seed)  # same initial weights for the same seed
    with ctx.strategy.scope():
        try:
            ctx.model = build_model(cfg.model, ctx.dataset.input_shape, ctx.dataset.num_classes,
                                    cfg.training.mixed_precision, channel_stats(train_images))
        except ModelError as exc:
            raise InputError(str(exc)) from None
        ctx.schedule = make_schedule(cfg.training, ctx.steps_per_epoch, ctx.total_steps)
        ctx.optimizer = build_optimizer(cfg.training, ctx.schedule)
        # Slots now, not at the first step: a restore must find every variable to fill (and the
        # Keras 3.15 placeholder bug needs it anyway, docs/architecture.md, "TensorFlow and Keras facts").
        ctx.optimizer.build(ctx.model.trainable_variables)
        ctx.step = tf.Variable(0, dtype=tf.int64, trainable=False, name="global_step")
        seed_var = tf.Variable(ctx.data_seed, dtype=tf.int64, trainable=False, name="data_seed")
        ctx.checkpoint = tf.train.Checkpoint(model=ctx.model, optimizer=ctx.optimizer, step=ctx.step,
                                             data_seed=seed_var)
        ctx.seed_var = seed_var
    if run_dir is not None:
        ctx.manager = tf.train.CheckpointManager(ctx.checkpoint, str(run_dir / CHECKPOINT_DIR),
                                                 max_to_keep=cfg.training.keep_checkpoints,
                                                 step_counter=ctx.step)


def state_bytes(ctx: RunContext) -> int:
    """Bytes of one checkpoint (model and optimizer variables) plus the saved model, with a margin."""
    import numpy as np

    from gui_app.core.disk import MARGIN_BYTES

    def size(variables) -> int:
        return sum(int(np.prod(v.shape)) * np.dtype(str(v.dtype).replace("tf.", "")).itemsize for v in variables)

    model = size(ctx.model.variables)
    return model + size(ctx.optimizer.variables) + model + MARGIN_BYTES


def kept_checkpoints(ctx: RunContext) -> list[str]:
    """The run's checkpoints, newest first: those the manager lists, then any other complete
    ``ckpt-N`` on disk (the manager's state file may be the damaged part)."""
    import re

    listed = list(ctx.manager.checkpoints) if ctx.manager else []
    folder = Path(ctx.manager.directory) if ctx.manager else None
    on_disk = []
    if folder is not None and folder.is_dir():
        for index in folder.glob("ckpt-*.index"):
            if re.fullmatch(r"ckpt-\d+", index.stem):
                on_disk.append(str(index.with_suffix("")))
    number = lambda p: int(p.rsplit("-", 1)[-1])  # noqa: E731
    return sorted(set(listed) | set(on_disk), key=number, reverse=True)


def restore_latest(ctx: RunContext, warnings: list[str] | None = None) -> bool:
    """Restore the newest checkpoint that is whole and fits the model; False when there is none.

    Every model and optimizer variable must come from the checkpoint (no ``expect_partial``: a
    checkpoint of another architecture must not half-load). A damaged one is skipped with a
    warning and the next older one tried; when none fits, :class:`InputError` names the newest.
    """
    candidates = kept_checkpoints(ctx)
    if not candidates:
        return False
    failures = []
    for path in candidates:
        try:
            status = ctx.checkpoint.restore(path)
            status.assert_consumed()
        except Exception as exc:  # noqa: BLE001 - a damaged bundle raises OpError, IndexError, ValueError, ...
            reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
            failures.append((path, reason))
            if warnings is not None:
                warnings.append(f"skipped checkpoint {Path(path).name}: it is damaged or does not fit the "
                                f"model ({reason})")
            continue
        ctx.data_seed = int(ctx.seed_var.numpy())
        return True
    path, reason = failures[0]
    raise InputError(f"{Path(path).parent}: no usable checkpoint ({len(failures)} tried; the newest, "
                     f"{Path(path).name}: {reason})")
