"""The run configuration: one frozen dataclass tree shared by the GUI, the CLI, run
directories and tests.

Every section validates itself in ``__post_init__`` and raises :class:`ConfigError`
naming the offending key (``training.learning_rate: must be > 0, got -1``). ``from_dict``
rejects unknown keys and wrong types before any dataclass is built, so a config file
with a typo fails before TensorFlow is even imported.

Checks that need the machine (does ``GPU:3`` exist?) live in ``gui_app.engine.training.devices``.
"""
from __future__ import annotations

import dataclasses
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gui_app.core.batch_split import batch_split
from gui_app.core.cluster_addresses import SshWorker
from gui_app.core.config_json import ConfigError, from_plain, parse_json, read_text, refuse_control_characters, to_plain
from gui_app.core.config_json import fail as _fail
from gui_app.core.config_json import show as _show

DATASETS = ("digits", "mnist", "fashion_mnist", "cifar10", "cifar100", "npz", "idx", "image_folder",
            "tfrecord", "tfds")
DATASETS_WITH_PATH = ("npz", "idx", "image_folder", "tfrecord")
# Datasets that decode encoded images (image_size and color_mode apply) and may stream.
DATASETS_OF_IMAGES = ("image_folder", "tfrecord", "tfds")
LOADING_MODES = ("auto", "memory", "stream")
CACHE_MODES = ("none", "auto", "memory", "file")
MODELS = ("mnist_cnn", "cifar_cnn", "mlp", "resnet20", "mobilenet_v2", "keras_file")
STRATEGIES = ("default", "one_device", "mirrored", "multi_worker_mirrored", "parameter_server")
MULTI_WORKER = ("multi_worker_mirrored", "parameter_server")
COMMUNICATIONS = ("auto", "ring", "nccl")
CLUSTER_RESOLVERS = ("tf_config", "slurm")
CROSS_DEVICE_OPS = ("nccl", "hierarchical_copy", "reduce_to_one")
ALL_REDUCE_DTYPES = ("float32", "float16")
ALL_REDUCING = ("mirrored", "multi_worker_mirrored")  # the strategies that all-reduce gradients
MAX_BYTES_PER_PACK = 1 << 30
MAX_ACCUMULATION_STEPS = 64
OPTIMIZERS = ("sgd", "momentum", "adam", "adamw", "rmsprop")
SCHEDULES = ("constant", "cosine", "step")
VALIDATION_SOURCES = ("split", "test", "none")
COLOR_MODES = ("rgb", "grayscale")

_DEVICE_RE = re.compile(r"^(CPU|GPU):(\d+)$")


# Upper bounds that stop a typo (or a hostile file) from asking for a run that never ends or
# an allocation that cannot succeed; documented in docs/config.md.
MAX_EPOCHS = 100_000
MAX_GLOBAL_BATCH = 65_536
MAX_STEPS = 10**9  # warmup_steps, checkpoint_every_steps
MAX_LEARNING_RATE = 1e6  # absurd rates stay possible (they diverge: a test does it), a typo like 1e400 not
MAX_IMAGE_PIXELS = 100_000_000  # default pixel limit before an image is decoded (decompression bombs)


def _at_most(key: str, value: float, limit: float) -> None:
    if value > limit:
        _fail(key, f"must be at most {limit:,}; got {value:,}" if value < 1e30 else f"must be at most {limit:,}")


def _finite_floats(section: Any, prefix: str) -> None:
    """NaN passes every ``<``/``>`` check silently and infinity most: refuse both first."""
    for f in dataclasses.fields(section):
        value = getattr(section, f.name)
        if isinstance(value, float) and not math.isfinite(value):
            _fail(f"{prefix}.{f.name}", f"must be a finite number; got {_show(value)}")


def _choice(key: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        _fail(key, f"must be one of {', '.join(allowed)}; got {_show(value)}")


def normalize_device(key: str, name: str) -> str:
    """Accept ``CPU:0``, ``gpu:1``, ``/device:GPU:1`` or ``/job:localhost/.../device:GPU:1``."""
    short = name.strip().split("device:")[-1].lstrip("/").upper()
    match = _DEVICE_RE.match(short)
    if not match:
        _fail(key, f"not a device name like 'CPU:0' or 'GPU:1': {_show(name)}")
    return f"{match.group(1)}:{int(match.group(2))}"


@dataclass(frozen=True)
class DatasetConfig:
    name: str = "digits"
    path: str | None = None
    test_path: str | None = None  # image_folder: a separate folder of test images
    image_size: tuple[int, int] = (32, 32)  # image_folder: (height, width) after resizing
    color_mode: str = "rgb"  # image_folder
    validation_split: float = 0.1  # fraction of the training set held out for validation
    validation: str = "split"  # where epoch-end validation comes from: split | test | none
    test_split: float = 0.2  # image_folder without test_path: fraction held out for testing
    max_image_pixels: int = MAX_IMAGE_PIXELS  # image files: larger ones are skipped before decoding
    # Streamed input (docs/config.md "Datasets larger than memory").
    loading: str = "auto"  # auto | memory | stream: auto streams above memory_budget_mb
    memory_budget_mb: int | None = None  # None: 25 % of RAM (or $REPLICA_STUDIO_MEMORY_BUDGET_MB)
    cache: str = "auto"  # streamed: none | auto | memory | file (in the run's data folder)
    shuffle_buffer: int = 10000  # streamed: examples in the seeded shuffle buffer
    label_offset: int = 0  # tfrecord: subtracted from image/class/label (1 for ImageNet's 1-based labels)
    tfds_name: str | None = None  # tfds: the dataset name, e.g. "mnist" or "my_set:1.0.0"
    data_dir: str | None = None  # tfds: the folder it was prepared in (no downloads)

    def __post_init__(self) -> None:
        _finite_floats(self, "dataset")
        _choice("dataset.name", self.name, DATASETS)
        refuse_control_characters(self, "dataset", ("path", "test_path", "tfds_name", "data_dir"))
        if self.name in DATASETS_WITH_PATH and not self.path:
            _fail("dataset.path", f"dataset {self.name!r} needs a path")
        if self.test_path and self.name not in ("image_folder", "tfrecord"):
            _fail("dataset.test_path", "only image_folder and tfrecord datasets take a test_path")
        _choice("dataset.loading", self.loading, LOADING_MODES)
        _choice("dataset.cache", self.cache, CACHE_MODES)
        if self.memory_budget_mb is not None and self.memory_budget_mb < 1:
            _fail("dataset.memory_budget_mb", f"must be at least 1 or null; got {self.memory_budget_mb}")
        if not 1 <= self.shuffle_buffer <= 10_000_000:
            _fail("dataset.shuffle_buffer", f"must be in [1, 10000000]; got {self.shuffle_buffer}")
        if self.label_offset and self.name != "tfrecord":
            _fail("dataset.label_offset", "only tfrecord datasets take a label_offset")
        if not 0 <= self.label_offset <= 1000:
            _fail("dataset.label_offset", f"must be in [0, 1000]; got {self.label_offset}")
        if self.name == "tfds" and not self.tfds_name:
            _fail("dataset.tfds_name", "dataset 'tfds' needs a tfds_name (a dataset prepared on disk)")
        if (self.tfds_name or self.data_dir) and self.name != "tfds":
            _fail("dataset.tfds_name" if self.tfds_name else "dataset.data_dir", "only tfds datasets take it")
        if len(self.image_size) != 2 or not all(8 <= s <= 1024 for s in self.image_size):
            _fail("dataset.image_size", f"must be [height, width] between 8 and 1024; got {list(self.image_size)}")
        _choice("dataset.color_mode", self.color_mode, COLOR_MODES)
        if not 0.0 <= self.validation_split < 1.0:
            _fail("dataset.validation_split", f"must be in [0, 1); got {self.validation_split}")
        _choice("dataset.validation", self.validation, VALIDATION_SOURCES)
        if self.validation == "split" and self.validation_split == 0.0:
            _fail("dataset.validation_split", "is 0 but dataset.validation is 'split'; use validation 'test' or 'none'")
        if not 0.0 < self.test_split < 1.0:
            _fail("dataset.test_split", f"must be in (0, 1); got {self.test_split}")
        if not 1 <= self.max_image_pixels <= 2**31:
            _fail("dataset.max_image_pixels", f"must be in [1, 2^31]; got {self.max_image_pixels}")


@dataclass(frozen=True)
class ModelConfig:
    name: str = "mnist_cnn"
    path: str | None = None  # keras_file: a .keras file holding the architecture

    def __post_init__(self) -> None:
        _choice("model.name", self.name, MODELS)
        refuse_control_characters(self, "model", ("path",))
        if self.name == "keras_file":
            if not self.path:
                _fail("model.path", "model 'keras_file' needs the path of a .keras file")
            if not self.path.endswith(".keras"):
                _fail("model.path", f"must be a .keras file; got {self.path!r}")


@dataclass(frozen=True)
class StrategyConfig:
    name: str = "mirrored"
    devices: tuple[str, ...] = ()  # mirrored: empty means every GPU, else the CPU
    device: str | None = None  # one_device: default GPU:0 if present, else CPU:0
    cross_device_ops: str | None = None  # mirrored: None lets TensorFlow choose
    # Multi-worker (docs/config.md): local worker/ps processes, or a cluster of hosts / a resolver.
    workers: int = 0  # worker processes started on 127.0.0.1 (0 with a cluster)
    ps: int = 0  # parameter_server: parameter-server processes started on 127.0.0.1
    cluster: str | tuple[str | SshWorker, ...] | None = None  # ["host:port" | {host, port}, ...], tf_config, slurm
    communication: str = "auto"  # multi_worker_mirrored: auto | ring | nccl
    timeout_s: float | None = None  # collective timeout; leave room for the first step's tracing
    join_timeout_s: float = 120.0  # how long the chief waits for the other workers to join
    max_restarts: int = 0  # restart the whole cluster from the last checkpoint after a failure
    allow_public_hosts: bool = False  # gRPC has no authentication: refuse public addresses unless set
    # Gradient all-reduce (docs/config.md "Communication options").
    all_reduce_dtype: str = "float32"  # float16: gradients are cast down for the reduction and back after
    bytes_per_pack: int = 0  # multi_worker_mirrored: CommunicationOptions(bytes_per_pack); 0 lets TF decide

    def __post_init__(self) -> None:
        _choice("strategy.name", self.name, STRATEGIES)
        _check_multi_worker(self)
        _choice("strategy.all_reduce_dtype", self.all_reduce_dtype, ALL_REDUCE_DTYPES)
        if self.all_reduce_dtype != "float32" and self.name not in ALL_REDUCING:
            # parameter_server updates the variables on the ps; one_device and default have nothing to reduce.
            _fail("strategy.all_reduce_dtype", f"only mirrored and multi_worker_mirrored all-reduce gradients, "
                                               f"not {self.name!r}")
        if not 0 <= self.bytes_per_pack <= MAX_BYTES_PER_PACK:
            _fail("strategy.bytes_per_pack", f"must be in [0, {MAX_BYTES_PER_PACK}] (1 GiB); got {self.bytes_per_pack}")
        if self.bytes_per_pack and self.name != "multi_worker_mirrored":
            # MirroredStrategy's reductions (ReductionToOneDevice, NCCL, hierarchical copy) ignore the options.
            _fail("strategy.bytes_per_pack", "only multi_worker_mirrored packs its all-reduce "
                                             "(the mirrored strategy's reductions ignore it)")
        devices = tuple(normalize_device("strategy.devices", d) for d in self.devices)
        if len(set(devices)) != len(devices):
            _fail("strategy.devices", f"lists a device twice: {list(self.devices)}")
        if devices and self.name != "mirrored":
            _fail("strategy.devices", f"only the mirrored strategy takes a device list, not {self.name!r}")
        object.__setattr__(self, "devices", devices)
        if self.device is not None:
            if self.name != "one_device":
                _fail("strategy.device", f"only the one_device strategy takes a device, not {self.name!r}")
            object.__setattr__(self, "device", normalize_device("strategy.device", self.device))
        if self.cross_device_ops is not None:
            if self.name != "mirrored":
                _fail("strategy.cross_device_ops", "only the mirrored strategy takes cross_device_ops")
            _choice("strategy.cross_device_ops", self.cross_device_ops, CROSS_DEVICE_OPS)


def _check_multi_worker(cfg: StrategyConfig) -> None:
    from gui_app.core.cluster_addresses import check_hosts

    multi = cfg.name in MULTI_WORKER
    for key, value, default in (("workers", cfg.workers, 0), ("ps", cfg.ps, 0), ("cluster", cfg.cluster, None),
                                ("timeout_s", cfg.timeout_s, None), ("max_restarts", cfg.max_restarts, 0)):
        if not multi and value != default:
            _fail(f"strategy.{key}", f"only multi_worker_mirrored and parameter_server take {key}, not {cfg.name!r}")
    _choice("strategy.communication", cfg.communication, COMMUNICATIONS)
    if cfg.communication != "auto" and cfg.name != "multi_worker_mirrored":
        _fail("strategy.communication", "only multi_worker_mirrored takes a communication")
    if not 0 <= cfg.workers <= 64:
        _fail("strategy.workers", f"must be in [0, 64]; got {cfg.workers}")
    if not 0 <= cfg.ps <= 16:
        _fail("strategy.ps", f"must be in [0, 16]; got {cfg.ps}")
    if cfg.timeout_s is not None and not cfg.timeout_s > 0:
        _fail("strategy.timeout_s", f"must be > 0 or null; got {cfg.timeout_s}")
    if not cfg.join_timeout_s > 0:
        _fail("strategy.join_timeout_s", f"must be > 0; got {cfg.join_timeout_s}")
    if not 0 <= cfg.max_restarts <= 100:
        _fail("strategy.max_restarts", f"must be in [0, 100]; got {cfg.max_restarts}")
    if not multi:
        return
    if isinstance(cfg.cluster, str):
        _choice("strategy.cluster", cfg.cluster, CLUSTER_RESOLVERS)
    elif cfg.cluster is not None:
        hosts = tuple(cfg.cluster)
        object.__setattr__(cfg, "cluster", hosts)
        if cfg.name == "parameter_server":
            _fail("strategy.cluster",
                  "a parameter_server cluster of hosts is given through TF_CONFIG: use \"tf_config\"")
        if not hosts:
            _fail("strategy.cluster", "lists no host; give [\"host:port\", ...] or leave it null")
        try:
            check_hosts(hosts, cfg.allow_public_hosts)
        except ValueError as exc:
            _fail("strategy.cluster", str(exc))
        if cfg.workers not in (0, len(hosts)):
            _fail("strategy.workers", f"is {cfg.workers} but strategy.cluster lists {len(hosts)} hosts")
    if cfg.cluster is None and cfg.workers < 1:
        _fail("strategy.workers", f"{cfg.name} needs at least 1 worker (processes on this machine) or a cluster")
    if cfg.name == "parameter_server" and cfg.cluster is None and cfg.ps < 1:
        _fail("strategy.ps", "parameter_server needs at least 1 parameter server")
    if cfg.name == "multi_worker_mirrored" and cfg.ps:
        _fail("strategy.ps", "only parameter_server takes parameter servers")


@dataclass(frozen=True)
class TrainingConfig:
    epochs: int = 5
    global_batch_size: int = 64
    optimizer: str = "adam"
    learning_rate: float = 0.001
    momentum: float = 0.9  # the momentum optimizer (Nesterov SGD)
    weight_decay: float = 0.004  # adamw
    schedule: str = "constant"
    warmup_steps: int = 0  # linear warm-up from 0 before the schedule starts
    step_decay_epochs: int = 2  # step schedule: multiply by step_decay_rate every N epochs
    step_decay_rate: float = 0.5
    seed: int | None = 1
    steps_per_call: int = 10  # training steps per tf.function call (docs/architecture.md, "The training loop")
    mixed_precision: bool = False  # GPU only
    checkpoint_every_steps: int = 0  # 0: at every epoch end (and on stop) only
    checkpoint_every_minutes: float = 0.0  # 0: no time-based checkpoints
    keep_checkpoints: int = 3  # the newest K are kept (a damaged newest one falls back to the next)
    accumulation_steps: int = 1  # micro-batches per optimizer step (one all-reduce each); the batch stays global
    batch_fingerprints: bool = False  # each step event names the batch each replica trained on (rehearse)

    def __post_init__(self) -> None:
        _finite_floats(self, "training")
        if self.epochs < 1:
            _fail("training.epochs", f"must be at least 1; got {self.epochs}")
        _at_most("training.epochs", self.epochs, MAX_EPOCHS)
        if self.global_batch_size < 1:
            _fail("training.global_batch_size", f"must be at least 1; got {self.global_batch_size}")
        _at_most("training.global_batch_size", self.global_batch_size, MAX_GLOBAL_BATCH)
        _choice("training.optimizer", self.optimizer, OPTIMIZERS)
        if not self.learning_rate > 0:
            _fail("training.learning_rate", f"must be > 0; got {self.learning_rate}")
        _at_most("training.learning_rate", self.learning_rate, MAX_LEARNING_RATE)
        _at_most("training.warmup_steps", self.warmup_steps, MAX_STEPS)
        _at_most("training.checkpoint_every_steps", self.checkpoint_every_steps, MAX_STEPS)
        _at_most("training.step_decay_epochs", self.step_decay_epochs, MAX_EPOCHS)
        if not 0 <= self.checkpoint_every_minutes <= 10_080:
            _fail("training.checkpoint_every_minutes",
                  f"must be in [0, 10080] (a week); got {self.checkpoint_every_minutes}")
        if not 1 <= self.keep_checkpoints <= 1000:
            _fail("training.keep_checkpoints", f"must be in [1, 1000]; got {self.keep_checkpoints}")
        if not 0 <= self.momentum < 1:
            _fail("training.momentum", f"must be in [0, 1); got {self.momentum}")
        if not 0 <= self.weight_decay <= 1:
            _fail("training.weight_decay", f"must be in [0, 1]; got {self.weight_decay}")
        _choice("training.schedule", self.schedule, SCHEDULES)
        if self.warmup_steps < 0:
            _fail("training.warmup_steps", f"must be >= 0; got {self.warmup_steps}")
        if self.step_decay_epochs < 1:
            _fail("training.step_decay_epochs", f"must be at least 1; got {self.step_decay_epochs}")
        if not 0 < self.step_decay_rate <= 1:
            _fail("training.step_decay_rate", f"must be in (0, 1]; got {self.step_decay_rate}")
        if self.seed is not None and not 0 <= self.seed < 2**31:
            _fail("training.seed", f"must be in [0, 2^31) or null; got {self.seed}")
        if not 1 <= self.steps_per_call <= 1000:
            _fail("training.steps_per_call", f"must be in [1, 1000]; got {self.steps_per_call}")
        if self.checkpoint_every_steps < 0:
            _fail("training.checkpoint_every_steps", f"must be >= 0; got {self.checkpoint_every_steps}")
        if not 1 <= self.accumulation_steps <= MAX_ACCUMULATION_STEPS:
            _fail("training.accumulation_steps",
                  f"must be in [1, {MAX_ACCUMULATION_STEPS}]; got {self.accumulation_steps}")
        if self.global_batch_size < self.accumulation_steps:
            _fail("training.accumulation_steps", f"{self.accumulation_steps} micro-batches do not fit the global "
                                                 f"batch of {self.global_batch_size}")


@dataclass(frozen=True)
class RuntimeConfig:
    cpu_devices: int = 1  # logical CPU devices to create before TensorFlow starts
    gpu_memory_growth: bool = True  # allocate GPU memory as needed instead of all of it

    def __post_init__(self) -> None:
        if not 1 <= self.cpu_devices <= 64:
            _fail("runtime.cpu_devices", f"must be in [1, 64]; got {self.cpu_devices}")


@dataclass(frozen=True)
class RunConfig:
    dataset: DatasetConfig = field(default_factory=DatasetConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    strategy: StrategyConfig = field(default_factory=StrategyConfig)
    training: TrainingConfig = field(default_factory=TrainingConfig)
    runtime: RuntimeConfig = field(default_factory=RuntimeConfig)

    def __post_init__(self) -> None:
        # Cross-section checks that need no TensorFlow.
        for dev in self.strategy.devices + ((self.strategy.device,) if self.strategy.device else ()):
            kind, index = dev.split(":")
            if kind == "CPU" and int(index) >= self.runtime.cpu_devices:
                key = "strategy.device" if self.strategy.device == dev else "strategy.devices"
                _fail(key, f"{dev} does not exist: runtime.cpu_devices is {self.runtime.cpu_devices} "
                           f"(CPU:0 to CPU:{self.runtime.cpu_devices - 1})")
        # The split rule where the config alone names the replicas (mirrored's device list);
        # the engine asks the same rule again once the strategy has counted them.
        replicas = len(self.strategy.devices)
        split = batch_split(self.strategy.name, self.training.global_batch_size, replicas, 1,
                            self.training.accumulation_steps)
        if replicas and split.error:
            raise ConfigError(split.error)
        if isinstance(self.strategy.cluster, tuple) and len(self.strategy.cluster) > 1 and self.training.seed is None:
            _fail("training.seed", "a cluster of several hosts needs a seed, so that every worker reads the same "
                                   "data order")
        accumulate = self.training.accumulation_steps
        if accumulate > 1 and self.strategy.name == "parameter_server":
            _fail("training.accumulation_steps", "parameter_server workers update the variables after every batch; "
                                                 "accumulation is for mirrored and multi_worker_mirrored")
        if self.training.mixed_precision and self.strategy.devices and not any(
                d.startswith("GPU") for d in self.strategy.devices):
            _fail("training.mixed_precision", "needs a GPU; the strategy uses only CPU devices")

    # ---- JSON round trip -------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return to_plain(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    @classmethod
    def from_dict(cls, data: Any) -> RunConfig:
        return from_plain(cls, data)

    @classmethod
    def from_json(cls, text: str, where: str = "config") -> RunConfig:
        return cls.from_dict(parse_json(text, where))

    @classmethod
    def load(cls, path: str | Path) -> RunConfig:
        return cls.from_json(read_text(path))

    def save(self, path: str | Path) -> None:
        from gui_app.core import atomic_io

        atomic_io.write_text(path, self.to_json() + "\n")

    def replace(self, **sections: Any) -> RunConfig:
        """A copy with whole sections or ``section={key: value}`` updates replaced."""
        updates = {}
        for name, value in sections.items():
            if isinstance(value, dict):
                value = dataclasses.replace(getattr(self, name), **value)
            updates[name] = value
        return dataclasses.replace(self, **updates)
