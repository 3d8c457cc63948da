"""Devices: configure TensorFlow's device topology once per process, detect what exists,
and check a strategy's device list against it.

TensorFlow fixes logical devices and GPU memory growth when its runtime initialises, so
:func:`configure_runtime` must run before any other TensorFlow call in the process.
"""
from __future__ import annotations

import os
import platform
from typing import Any

from gui_app.core.config import ConfigError, RunConfig, RuntimeConfig


def configure_runtime(runtime: RuntimeConfig) -> list[str]:
    """Split the CPU into ``runtime.cpu_devices`` logical devices and set GPU memory growth.

    Returns warnings (e.g. memory growth could not be set because TF already started).
    """
    import tensorflow as tf

    warnings = []
    for gpu in tf.config.list_physical_devices("GPU"):
        try:
            tf.config.experimental.set_memory_growth(gpu, runtime.gpu_memory_growth)
        except RuntimeError as exc:  # runtime already initialised
            warnings.append(f"could not set memory growth on {gpu.name}: {exc}")
    cpus = tf.config.list_physical_devices("CPU")
    if cpus and runtime.cpu_devices > 1:
        try:
            tf.config.set_logical_device_configuration(
                cpus[0], [tf.config.LogicalDeviceConfiguration() for _ in range(runtime.cpu_devices)])
        except RuntimeError as exc:
            current = len(tf.config.list_logical_devices("CPU"))
            if current != runtime.cpu_devices:
                raise ConfigError(f"runtime.cpu_devices: TensorFlow already started with {current} "
                                  f"CPU devices in this process ({exc})") from None
    return warnings


def _cpu_description() -> str:
    name = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return name


def nccl_available() -> bool:
    """NCCL ships with TensorFlow's Linux GPU builds only (never on Windows or macOS)."""
    import tensorflow as tf

    return bool(tf.config.list_physical_devices("GPU")) and platform.system() == "Linux" and bool(
        tf.sysconfig.get_build_info().get("is_cuda_build"))


def detect() -> dict[str, Any]:
    """Every physical GPU and the CPU, plus the logical devices of this process."""
    import keras
    import tensorflow as tf

    gpus = []
    for i, gpu in enumerate(tf.config.list_physical_devices("GPU")):
        details = {}
        try:
            details = tf.config.experimental.get_device_details(gpu)
        except Exception:  # noqa: BLE001 - not every build reports details
            pass
        memory = None
        try:
            memory = tf.config.experimental.get_memory_info(f"GPU:{i}").get("peak")  # only after init
        except Exception:  # noqa: BLE001 - not before the runtime started on it
            pass
        gpus.append({
            "name": f"GPU:{i}",
            "description": details.get("device_name", gpu.name),
            "memory_bytes": details.get("memory_limit", memory),
            "compute_capability": list(details["compute_capability"]) if details.get("compute_capability") else None,
        })
    return {
        "tensorflow": tf.__version__,
        "keras": keras.__version__,
        "python": platform.python_version(),
        "gpus": gpus,
        "cpu": {"name": "CPU:0", "description": _cpu_description(), "cores": os.cpu_count() or 1},
        "logical_devices": [{"name": d.name, "type": d.device_type} for d in tf.config.list_logical_devices()],
        "nccl_available": nccl_available(),
        "cuda_build": bool(tf.sysconfig.get_build_info().get("is_cuda_build")),
    }


def logical_device_names() -> list[str]:
    """Short names (``CPU:0``, ``GPU:1``) of the logical devices of this process."""
    import tensorflow as tf

    return [d.name.split("device:")[-1] for d in tf.config.list_logical_devices() if d.device_type in ("CPU", "GPU")]


def check_devices(config: RunConfig) -> None:
    """Raise ConfigError for a strategy device that this machine does not have."""
    available = logical_device_names()
    wanted = list(config.strategy.devices) + ([config.strategy.device] if config.strategy.device else [])
    key = "strategy.device" if config.strategy.device else "strategy.devices"
    for dev in wanted:
        if dev not in available:
            raise ConfigError(f"{key}: {dev} does not exist on this machine (available: {', '.join(available)})")
    if config.training.mixed_precision and not any(d.startswith("GPU") for d in available):
        raise ConfigError("training.mixed_precision: needs a GPU and this machine has none")


def format_devices(info: dict[str, Any]) -> str:
    """The human-readable table of ``replica-studio devices``."""
    lines = [f"TensorFlow {info['tensorflow']}, Keras {info['keras']}, Python {info['python']}"]
    cpu = info["cpu"]
    lines.append(f"CPU:0  {cpu['description']} ({cpu['cores']} cores)")
    if not info["gpus"]:
        lines.append("No GPU found" + ("" if info["cuda_build"] else " (this TensorFlow build has no CUDA; "
                                        "on Linux install replica-studio[cuda])"))
    for gpu in info["gpus"]:
        mem = f"{gpu['memory_bytes'] / 2**30:.1f} GiB" if gpu["memory_bytes"] else "memory unknown"
        cc = ".".join(map(str, gpu["compute_capability"])) if gpu["compute_capability"] else "?"
        lines.append(f"{gpu['name']}  {gpu['description']}, {mem}, compute capability {cc}")
    lines.append("Logical devices: " + ", ".join(d["name"].split("device:")[-1] for d in info["logical_devices"]))
    lines.append(f"NCCL: {'available' if info['nccl_available'] else 'not available'}")
    return "\n".join(lines)
