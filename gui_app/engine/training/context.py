"""What every engine command sets up before it trains or evaluates: the runtime, the input,
the strategy (:class:`RunContext`), then the model with its optimizer and checkpoint
(:class:`ModelState`), in the order TensorFlow needs.
"""
from __future__ import annotations

import platform
import random
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from gui_app.core.batch_split import batch_split
from gui_app.core.config import MULTI_WORKER, ConfigError, RunConfig
from gui_app.core.messages import first_line
from gui_app.core.rundir import CHECKPOINT_DIR
from gui_app.engine.datasets.base import ProgressCallback
from gui_app.engine.run.failures import BatchShape, InputError
from gui_app.engine.training.inputs import InputSource
from gui_app.engine.training.strategies import BuiltStrategy

if TYPE_CHECKING:
    import keras
    import tensorflow as tf

DATA_DIR = "data"  # in the run directory: the training cache of dataset.cache 'file'
NUMPY_DATASETS = ("digits", "mnist", "fashion_mnist", "cifar10", "cifar100", "npz", "idx")


def versions() -> dict[str, str]:
    import keras
    import tensorflow as tf

    return {"tensorflow": tf.__version__, "keras": keras.__version__, "python": platform.python_version()}


@dataclass
class RunContext:
    config: RunConfig
    input: InputSource
    built: BuiltStrategy
    data_seed: int  # the data order's seed; a restored checkpoint brings its own
    warnings: list[str] = field(default_factory=list)

    @property
    def strategy(self):
        return self.built.strategy

    @property
    def steps_per_epoch(self) -> int:
        return self.input.train_examples // self.config.training.global_batch_size

    @property
    def total_steps(self) -> int:
        return self.steps_per_epoch * self.config.training.epochs

    @property
    def batch(self) -> BatchShape:
        replicas = self.built.num_replicas
        return BatchShape(self.config.training.global_batch_size // replicas, replicas)


@dataclass
class ModelState:
    """The model and what its checkpoints hold, created inside the strategy's scope."""

    model: keras.Model
    optimizer: keras.optimizers.Optimizer
    schedule: keras.optimizers.schedules.LearningRateSchedule  # step -> learning rate
    step: tf.Variable  # int64: global steps done
    seed_var: tf.Variable  # int64: the data order's seed, saved in the checkpoint
    checkpoint: tf.train.Checkpoint
    manager: tf.train.CheckpointManager
    # The same without the random state: what a checkpoint written before it was saved holds.
    without_random_state: tf.train.Checkpoint | None = None

    def steps_done(self) -> int:
        return int(self.step.numpy())

    def weights_finite(self) -> bool:
        """Whether every weight of the model is finite. A step whose loss was still finite can
        leave NaN or infinite weights (its update overflowed): such a state is never saved as a
        checkpoint, or it would rotate the last finite one out and a resume would restore it.
        Reads every variable once, as the checkpoint's save does."""
        import numpy as np

        return all(bool(np.isfinite(w.numpy()).all()) for w in self.model.weights)

    def kept_checkpoint_path(self) -> str | None:
        """The last good checkpoint a failed run keeps (its path prefix), None when none was written."""
        return self.manager.latest_checkpoint or None

    def kept_checkpoint(self) -> str:
        """Which checkpoint a failed run keeps, in words for its error line."""
        latest = self.manager.latest_checkpoint
        if not latest:
            return ("no checkpoint was written before it, so there is nothing to resume: train again with a lower "
                    "training.learning_rate")
        step = latest.rsplit("-", 1)[-1]
        return f"the last good checkpoint, of step {step} ({latest}), is kept: resume continues from it"


def single_process(config: RunConfig) -> RunConfig:
    """The config as one process runs it: a cluster's trained model needs no cluster to be
    evaluated again or exported."""
    if config.strategy.name not in MULTI_WORKER:
        return config
    return config.replace(strategy={"name": "default", "workers": 0, "ps": 0, "cluster": None,
                                    "communication": "auto", "timeout_s": None, "max_restarts": 0})


def prepare(config: RunConfig, progress: ProgressCallback | None, data_dir: Path,
            data_seed: int | None = None) -> RunContext:
    """Configure TensorFlow, check devices, open the input, build the strategy. ``data_dir``:
    the run's data folder (a streamed set's file cache).

    Must be the first TensorFlow work of the process (logical devices are fixed at start-up).
    """
    from gui_app.engine.datasets import DatasetError, load_dataset
    from gui_app.engine.training import devices, strategies
    from gui_app.engine.training.inputs import open_source

    # Datasets read with numpy alone are checked before TensorFlow starts (about 3 s): a bad
    # file is refused at once. The others decode with TensorFlow, so they wait for the runtime.
    try:
        dataset = load_dataset(config.dataset, progress) if config.dataset.name in NUMPY_DATASETS else None
    except DatasetError as exc:
        raise InputError(str(exc)) from None
    warnings = devices.configure_runtime(config.runtime)
    devices.check_devices(config)
    if config.training.mixed_precision:
        import keras

        keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        source = open_source(config, progress, data_dir, dataset)
    except DatasetError as exc:
        raise InputError(str(exc)) from None
    del dataset  # the source holds what it needs (the set once, in memory)
    warnings += list(source.warnings)
    # Without a seed, draw one: it is stored in the checkpoint so a resume sees the same data order.
    # (The workers of one cluster get the launcher's draw, so that they all read the same order.)
    if data_seed is None:
        data_seed = config.training.seed if config.training.seed is not None else random.randrange(2**31)
    batch = config.training.global_batch_size
    if source.train_examples < batch:
        raise ConfigError(f"training.global_batch_size: {batch} is larger than the {source.train_examples} "
                          "training examples")
    built = strategies.build_strategy(config.strategy)
    warnings += built.warnings
    # The one split rule (core/batch_split.py): the same answer as worker, submit and the form.
    warnings += batch_split(config.strategy.name, batch, built.num_replicas, built.num_workers,
                            config.training.accumulation_steps).warnings()
    return RunContext(config, source, built, data_seed, warnings)


def build_model_state(ctx: RunContext, run_dir: Path) -> ModelState:
    """Create model, optimizer, step counter and checkpoint manager inside the strategy scope."""
    import keras
    import tensorflow as tf

    from gui_app.engine.training.models import ModelError, build_model
    from gui_app.engine.training.optim import build_optimizer, make_schedule

    cfg = ctx.config
    stats = ctx.input.normalization_stats()
    if cfg.training.seed is not None:
        keras.utils.set_random_seed(cfg.training.seed)  # same initial weights for the same seed
    with ctx.strategy.scope():
        try:
            model = build_model(cfg.model, ctx.input.input_shape, ctx.input.num_classes,
                                cfg.training.mixed_precision, stats)
        except ModelError as exc:
            raise InputError(str(exc)) from None
        schedule = make_schedule(cfg.training, ctx.steps_per_epoch, ctx.total_steps)
        optimizer = build_optimizer(cfg.training, schedule)
        # Slots now, not at the first step: a restore must find every variable to fill (and the
        # Keras 3.15 placeholder bug needs it anyway, docs/architecture.md, "TensorFlow and Keras facts").
        optimizer.build(model.trainable_variables)
        step = tf.Variable(0, dtype=tf.int64, trainable=False, name="global_step")
        seed_var = tf.Variable(ctx.data_seed, dtype=tf.int64, trainable=False, name="data_seed")
        parts = dict(model=model, optimizer=optimizer, step=step, data_seed=seed_var)
        checkpoint = tf.train.Checkpoint(**parts)
        without = None
        # Keras 3 does not track its layers' seed generators (dropout, random augmentation) for
        # tf.train.Checkpoint: a resumed run drew its masks from the start again, and differed from
        # an uninterrupted one at the first step after the resume (found by ``rehearse``).
        random_state = [v for v in model.variables if v.path.endswith("seed_generator_state")]
        if random_state:
            checkpoint, without = tf.train.Checkpoint(**parts, random_state=random_state), checkpoint
    manager = tf.train.CheckpointManager(checkpoint, str(run_dir / CHECKPOINT_DIR),
                                         max_to_keep=cfg.training.keep_checkpoints, step_counter=step)
    return ModelState(model, optimizer, schedule, step, seed_var, checkpoint, manager, without)


def state_bytes(state: ModelState) -> int:
    """Bytes of one checkpoint (model and optimizer variables) plus the saved model, with a margin."""
    import numpy as np

    from gui_app.core.disk import MARGIN_BYTES

    def size(variables) -> int:
        return sum(int(np.prod(v.shape)) * np.dtype(str(v.dtype).replace("tf.", "")).itemsize for v in variables)

    model = size(state.model.variables)
    return model + size(state.optimizer.variables) + model + MARGIN_BYTES


def kept_checkpoints(state: ModelState) -> list[str]:
    """The run's checkpoints, newest first: those the manager lists, then any other complete
    ``ckpt-N`` on disk (the manager's state file may be the damaged part)."""
    folder = Path(state.manager.directory)
    on_disk = []
    if folder.is_dir():
        for index in folder.glob("ckpt-*.index"):
            if re.fullmatch(r"ckpt-\d+", index.stem):
                on_disk.append(str(index.with_suffix("")))
    return sorted(set(state.manager.checkpoints) | set(on_disk), key=lambda p: int(p.rsplit("-", 1)[-1]), reverse=True)


def _checkpoint_of(state: ModelState, path: str, warnings: list[str]):
    """The checkpoint object that fits ``path``: one written before the random state was saved
    restores without it (its run resumes, its dropout masks start again), with a warning."""
    import tensorflow as tf

    if state.without_random_state is None:
        return state.checkpoint
    try:
        saved = {name.split("/", 1)[0] for name, _ in tf.train.list_variables(path)}
    except (ValueError, tf.errors.OpError):
        return state.checkpoint  # damaged: the restore says how
    if "random_state" in saved:
        return state.checkpoint
    warnings.append(f"checkpoint {Path(path).name} holds no random state (written by an older release): the "
                    "resumed run's dropout masks start again, so it differs from an uninterrupted run")
    return state.without_random_state


def restore_latest(ctx: RunContext, state: ModelState, warnings: list[str]) -> bool:
    """Restore the newest checkpoint that is whole and fits the model (and its data order's
    seed into ``ctx``); False when there is none.

    Every model and optimizer variable must come from the checkpoint (no ``expect_partial``: a
    checkpoint of another architecture must not half-load). A damaged one is skipped with a
    warning and the next older one tried; when none fits, :class:`InputError` names the newest.
    """
    candidates = kept_checkpoints(state)
    if not candidates:
        return False
    failures = []
    for path in candidates:
        try:
            status = _checkpoint_of(state, path, warnings).restore(path)
            status.assert_consumed()
        except Exception as exc:  # noqa: BLE001 - a damaged bundle raises OpError, IndexError, ValueError, ...
            reason = first_line(exc, 200)
            failures.append((path, reason))
            warnings.append(f"skipped checkpoint {Path(path).name}: it is damaged or does not fit the "
                            f"model ({reason})")
            continue
        ctx.data_seed = int(state.seed_var.numpy())
        return True
    path, reason = failures[0]
    raise InputError(f"{Path(path).parent}: no usable checkpoint ({len(failures)} tried; the newest, "
                     f"{Path(path).name}: {reason})")
