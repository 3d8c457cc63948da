"""Build the ``tf.distribute`` strategy a run asks for.

Multi-worker strategies (MultiWorkerMirrored, ParameterServer) need TF_CONFIG and must be
created before any other TensorFlow op ("Collective ops must be configured at program
startup"): the worker command calls :func:`build_strategy` first thing, and later calls in the
same process get the same object back.
"""
from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from typing import Any

from gui_app.core.config import StrategyConfig


@dataclass
class BuiltStrategy:
    strategy: Any  # tf.distribute.Strategy
    devices: list[str]  # the full device name of each replica, in replica order
    cross_device_ops: str | None = None
    warnings: list[str] = field(default_factory=list)
    num_workers: int = 1
    replica_workers: list[int] = field(default_factory=list)  # the worker of each replica in ``devices``
    local_devices: list[str] = field(default_factory=list)  # this worker's replicas (memory is asked here)
    coordinator: Any = None  # parameter_server: the ClusterCoordinator
    # What the gradient all-reduce really uses (run_started's strategy section): the dtype, and for
    # collective all-reduce (multi_worker_mirrored) the implementation and bytes per pack.
    communication: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.replica_workers:
            self.replica_workers = [0] * len(self.devices)
        if not self.local_devices:
            self.local_devices = list(self.devices)

    @property
    def num_replicas(self) -> int:
        return self.strategy.num_replicas_in_sync


def _cross_device_ops(tf, name: str | None, devices: tuple[str, ...], nccl_ok: bool, warnings: list[str]):
    """The CrossDeviceOps object and the name of what is really used (after fallbacks)."""
    all_gpus = all(d.startswith("GPU") for d in devices)
    if name is None:
        if len(devices) > 1 and not all_gpus:
            # TensorFlow would warn and fall back itself; choose the CPU-friendly reduction openly.
            return tf.distribute.ReductionToOneDevice(), "reduce_to_one"
        return None, "default"
    if name == "nccl":
        if nccl_ok and all_gpus:
            return tf.distribute.NcclAllReduce(), "nccl"
        why = "NCCL needs GPUs on Linux" if not nccl_ok else "NCCL all-reduces between GPUs only"
        warnings.append(f"strategy.cross_device_ops: nccl is not available ({why}); using hierarchical_copy")
        name = "hierarchical_copy"
    if name == "hierarchical_copy":
        if not all_gpus:
            # HierarchicalCopyAllReduce assumes a DGX-1-like GPU topology; on CPUs it is not defined.
            warnings.append("strategy.cross_device_ops: hierarchical_copy works between GPUs only; "
                            "using reduce_to_one")
            return tf.distribute.ReductionToOneDevice(), "reduce_to_one"
        return tf.distribute.HierarchicalCopyAllReduce(), "hierarchical_copy"
    return tf.distribute.ReductionToOneDevice(), "reduce_to_one"


def build_strategy(cfg: StrategyConfig) -> BuiltStrategy:
    """Create the strategy. Call after :func:`gui_app.engine.training.devices.configure_runtime`."""
    import tensorflow as tf

    from gui_app.engine.training.devices import nccl_available

    if cfg.name == "multi_worker_mirrored":
        return build_multi_worker_mirrored(cfg)
    if cfg.name == "parameter_server":
        return build_parameter_server_strategy(cfg)
    warnings: list[str] = []
    gpus = [d.name for d in tf.config.list_logical_devices("GPU")]
    if cfg.name == "default":
        strategy = tf.distribute.get_strategy()
        device = gpus[0] if gpus else tf.config.list_logical_devices("CPU")[0].name
        return BuiltStrategy(strategy, [device], None, warnings)
    if cfg.name == "one_device":
        device = cfg.device or ("GPU:0" if gpus else "CPU:0")
        strategy = tf.distribute.OneDeviceStrategy(f"/{device.lower()}")
        return BuiltStrategy(strategy, [strategy.extended.worker_devices[0]], None, warnings)
    # mirrored: the ticked devices, else every GPU, else the first CPU.
    devices = cfg.devices or tuple(g.split("device:")[-1] for g in gpus) or ("CPU:0",)
    ops, used = _cross_device_ops(tf, cfg.cross_device_ops, devices, nccl_available(), warnings)
    strategy = tf.distribute.MirroredStrategy(devices=list(devices), cross_device_ops=ops)
    return BuiltStrategy(strategy, list(strategy.extended.worker_devices), used, warnings,
                         communication={"all_reduce_dtype": cfg.all_reduce_dtype})


# ---- MultiWorkerMirroredStrategy --------------------------------------------------------------
_MULTI_WORKER: BuiltStrategy | None = None  # one per process: collectives are configured once


@contextlib.contextmanager
def _cpu_replicas(count: int):
    """MultiWorkerMirroredStrategy puts one replica on a worker without GPUs, whatever its logical
    CPU devices; ``runtime.cpu_devices`` applies per worker, so list that many CPU replicas. This
    patches a private method of TF 2.21 for the construction only; if it is gone, one replica."""
    from tensorflow.python.distribute import collective_all_reduce_strategy as cars

    original = getattr(cars.CollectiveAllReduceExtended, "_initialize_local_devices", None)
    if count <= 1 or original is None:
        yield
        return

    def local_devices(self, resolver, worker_device):
        devices, kind = original(self, resolver, worker_device)
        if kind == "CPU":
            devices = tuple(f"{worker_device}/device:CPU:{i}" for i in range(count))
        return devices, kind

    cars.CollectiveAllReduceExtended._initialize_local_devices = local_devices
    try:
        yield
    finally:
        cars.CollectiveAllReduceExtended._initialize_local_devices = original


def build_multi_worker_mirrored(cfg: StrategyConfig) -> BuiltStrategy:
    global _MULTI_WORKER
    if _MULTI_WORKER is not None:
        return _MULTI_WORKER
    import tensorflow as tf

    warnings: list[str] = []
    impl = tf.distribute.experimental.CommunicationImplementation
    chosen = {"auto": impl.AUTO, "ring": impl.RING, "nccl": impl.NCCL}[cfg.communication]
    # Physical devices and their configuration only: listing logical devices would start the
    # runtime before the collectives are configured.
    gpus = tf.config.list_physical_devices("GPU")
    cpu = tf.config.list_physical_devices("CPU")[0]
    cpus = 0 if gpus else len(tf.config.get_logical_device_configuration(cpu) or [None])
    if cfg.communication == "nccl" and not gpus:
        warnings.append("strategy.communication: nccl needs GPUs; using ring")
        chosen = impl.RING
    # bytes_per_pack here, in the strategy's own options, so that every collective all-reduce of the run
    # packs the same way: Keras's (inside apply_gradients) and ours (loop.py, float16) merge with them.
    options = tf.distribute.experimental.CommunicationOptions(bytes_per_pack=cfg.bytes_per_pack,
                                                              implementation=chosen, timeout_seconds=cfg.timeout_s)
    # TF_CONFIG: set by the launcher, the worker command (from a host list or Slurm's variables in
    # Slurm's node order, engine/schedulers/slurm/cluster.py) or a scheduler.
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    with _cpu_replicas(cpus):
        strategy = tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=resolver,
                                                              communication_options=options)
    local = list(strategy.extended.worker_devices)
    num_workers = max(1, strategy.num_replicas_in_sync // max(1, len(local)))
    task = resolver.task_id or 0
    devices, owners = [], []
    for w in range(num_workers):
        for d in local:  # every worker has the same devices; gather orders replicas by worker
            devices.append(d.replace(f"/task:{task}/", f"/task:{w}/"))
            owners.append(w)
    # Read back from the strategy (a private attribute of TF 2.21; what was asked if it moved), so the
    # run says what the collectives really use.
    used = getattr(strategy.extended, "_communication_options", options)
    communication = {"all_reduce_dtype": cfg.all_reduce_dtype, "bytes_per_pack": int(used.bytes_per_pack),
                     "implementation": used.implementation.name.lower()}
    _MULTI_WORKER = BuiltStrategy(strategy, devices, cfg.communication, warnings, num_workers=num_workers,
                                  replica_workers=owners, local_devices=local, communication=communication)
    return _MULTI_WORKER


# ---- ParameterServerStrategy (this process is the coordinator) --------------------------------
def build_parameter_server_strategy(cfg: StrategyConfig) -> BuiltStrategy:
    import json

    from gui_app.engine.training.ps_loop import build_parameter_server

    cluster = json.loads(os.environ.get("TF_CONFIG", "{}")).get("cluster", {})
    workers, num_ps = len(cluster.get("worker", [])), len(cluster.get("ps", []))
    strategy, coordinator = build_parameter_server(num_ps)
    devices = [f"/job:worker/replica:0/task:{w}/device:CPU:0" for w in range(workers)]
    return BuiltStrategy(strategy, devices, None, [], num_workers=workers, replica_workers=list(range(workers)),
                         local_devices=[], coordinator=coordinator)
