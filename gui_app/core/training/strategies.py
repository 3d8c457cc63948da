"""Build the ``tf.distribute`` strategy a run asks for.

Multi-worker strategies (MultiWorkerMirrored, ParameterServer) need TF_CONFIG and must be
created before any other TensorFlow op; they get their own builder beside these when they
come.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from gui_app.core.config import StrategyConfig


@dataclass
class BuiltStrategy:
    strategy: object  # tf.distribute.Strategy
    devices: list[str]  # the full device name of each replica, in replica order
    cross_device_ops: str | None = None
    warnings: list[str] = field(default_factory=list)

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
    """Create the strategy. Call after :func:`gui_app.core.training.devices.configure_runtime`."""
    import tensorflow as tf

    from gui_app.core.training.devices import nccl_available

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
    return BuiltStrategy(strategy, list(strategy.extended.worker_devices), used, warnings)
