"""GPU figures for the step events (docs/architecture.md, "Decisions": GPU figures come from NVML
in the engine): NVML's utilisation, memory, temperature and power of every card, sampled off
the training thread by ``core.gpu_monitor.GpuMonitor``, and the memory TensorFlow holds on each
replica's GPU of this process. Nothing samples without a replica on a GPU."""
from __future__ import annotations

from gui_app.core.gpu_monitor import GpuMonitor, GpuSample
from gui_app.engine.training.actions.base import Action
from gui_app.engine.training.strategies import BuiltStrategy


class GpuSampler(Action):
    def __init__(self, monitor: GpuMonitor, built: BuiltStrategy):
        self._monitor = monitor
        self._devices, self._local = built.devices, set(built.local_devices)
        if any("GPU" in d for d in built.devices):
            monitor.start()

    def latest(self) -> list[GpuSample] | None:
        """The newest NVML sample of every card, or None when nothing samples."""
        return [GpuSample(**card) for card in self._monitor.latest()] or None

    def replica_memory(self) -> list[tuple[int | None, int | None]]:
        """(in use, peak) bytes per replica device; (None, None) where TensorFlow cannot tell
        (CPUs, and another worker's GPU: it reports nothing here)."""
        import tensorflow as tf

        out: list[tuple[int | None, int | None]] = []
        for device in self._devices:
            short = device.split("device:")[-1]
            if not short.startswith("GPU") or device not in self._local:
                out.append((None, None))
                continue
            try:
                info = tf.config.experimental.get_memory_info(short)
                out.append((int(info["current"]), int(info["peak"])))
            except (ValueError, RuntimeError):
                out.append((None, None))
        return out

    def close(self) -> None:
        self._monitor.stop()
