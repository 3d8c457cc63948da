"""The NVIDIA GPUs of one run as the engine's NVML sampler saw them (the ``gpus`` of ``step``
events, gui_app/core/gpu_monitor.py): the latest sample of each card, its utilisation per step,
and which replicas run on it (:func:`gpu_replicas`). Empty for a run on CPUs or on a machine
without an NVIDIA driver. Written against a fake NVML: not run on a real GPU here.
"""
from __future__ import annotations

import re

import numpy as np

from gui_app.core.events import ReplicaInfo, ReplicaStats, RunStarted, Step
from gui_app.core.gpu_monitor import GpuSample
from gui_app.core.history.buffers import GrowableArray, number

_TASK = re.compile(r"/task:(\d+)")
MULTI_PROCESS = ("multi_worker_mirrored", "parameter_server")


def gpu_index(device: str) -> int | None:
    """``/job:localhost/replica:0/task:0/device:GPU:1`` -> 1; None for a CPU or another name."""
    short = device.split("device:")[-1] if isinstance(device, str) else ""
    kind, _, index = short.partition(":")
    return int(index) if kind == "GPU" and index.isdigit() else None


def gpu_replicas(replicas: dict[int, tuple[str, int | None]], strategy: str = "") -> dict[int, list[int]]:
    """NVML GPU index -> the replicas whose device is that GPU of the chief's process.

    The samples come from the process that streams the events (the chief, task 0), so only its
    replicas can be placed; under ``parameter_server`` that process runs no replica at all.
    TensorFlow's ``GPU:N`` is taken as NVML's GPU N (true unless CUDA_VISIBLE_DEVICES or
    CUDA_DEVICE_ORDER renumber the cards). A replica without a worker takes its device's task."""
    out: dict[int, list[int]] = {}
    if strategy == "parameter_server":
        return out
    for replica, (device, worker) in sorted(replicas.items()):
        task = _TASK.search(device or "")
        if worker is None and task is not None:
            worker = int(task.group(1))
        index = gpu_index(device)
        if index is not None and (worker or 0) == 0:
            out.setdefault(index, []).append(replica)
    return out


class GpuSeries:
    """The GPUs of one run: the latest sample of each (by NVML index) and utilisation per step,
    one column per GPU in the order they were first seen, and where the run's replicas are.
    Steps stay increasing, as in ReplicaSeries: a replayed step drops the points after it."""

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        self.steps = GrowableArray(1)
        self.utilization = GrowableArray(0)
        self.indices: list[int] = []
        self.latest: dict[int, GpuSample] = {}
        self.replicas: dict[int, tuple[str, int]] = {}  # replica -> (device, worker)
        self.strategy = ""

    def start(self, run: RunStarted) -> bool:
        """Learn where the replicas run; True when GPUs are shown (their placement may change)."""
        self._learn_replicas(run.replicas)
        self.strategy = str(run.strategy.get("name", ""))
        return bool(self.indices)

    def add_step(self, event: Step) -> bool:
        if not self.replicas:  # an opened run written without run_started replicas
            self._learn_replicas(event.replicas)
        if not event.gpus:
            return False
        step = float(event.step)
        if len(self.steps) and step <= self.steps.last(0):
            n = int(np.searchsorted(self.steps.column(0), step - 1, side="right"))
            self.steps.truncate(n)
            self.utilization.truncate(n)
        for sample in event.gpus:
            if sample.index not in self.latest:
                self.indices.append(sample.index)
            self.latest[sample.index] = sample
        self.utilization.set_columns(len(self.indices))
        row = np.full(len(self.indices), np.nan)
        for sample in event.gpus:
            row[self.indices.index(sample.index)] = number(sample.utilization)
        self.steps.append((step,))
        self.utilization.append(row)
        return True

    def placement(self) -> dict[int, list[int]]:
        return gpu_replicas(dict(self.replicas), self.strategy)

    def multi_process(self) -> bool:
        """The events come from one process of several: the GPUs shown are the chief's only."""
        return self.strategy in MULTI_PROCESS or len({w for _, w in self.replicas.values()}) > 1

    def _learn_replicas(self, entries: list[ReplicaInfo] | list[ReplicaStats]) -> None:
        for entry in entries:
            self.replicas[entry.replica] = (entry.device or "", entry.worker)
