"""The per-replica numbers of one run, Qt-free: a step column and one ``[steps, replicas]``
buffer per metric, built from the run's events (the Replicas tab draws them)."""
from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from gui_app.ui.charts.series import GrowableArray, number

SPEED_WINDOW = 20  # examples/s bars show the mean of this many latest steps
METRICS = ("loss", "grad_norm", "examples_per_sec", "memory_bytes", "peak_memory_bytes")


def short_device(name: str) -> str:
    """``/job:localhost/replica:0/task:0/device:GPU:1`` -> ``GPU:1``."""
    return name.split("device:")[-1] if name else "?"


def replica_label(device: str, worker: int | None) -> str:
    """``CPU:0``, or ``1/CPU:0`` for replica CPU:0 of worker 1 in a multi-worker run."""
    return f"{worker}/{short_device(device)}" if worker is not None else short_device(device)


class ReplicaSeries:
    """Per-replica numbers of one run: a step column and one ``[steps, replicas]`` buffer per
    metric. Steps stay increasing: a resumed ``run_started`` or a replayed step drops the
    points after it."""

    def __init__(self) -> None:
        self.steps = GrowableArray(1)
        self.metrics = {name: GrowableArray(0) for name in METRICS}
        self.devices: list[str] = []
        self.workers: list[int | None] = []  # the worker (task index) of each replica, if known

    @property
    def replicas(self) -> int:
        return len(self.devices)

    def clear(self) -> None:
        self.steps.clear()
        self.metrics = {name: GrowableArray(0) for name in METRICS}
        self.devices = []
        self.workers = []

    def ensure_replicas(self, count: int) -> None:
        if count > self.replicas:
            self.workers += [None] * (count - self.replicas)
            self.devices += [""] * (count - self.replicas)
            for buf in self.metrics.values():
                buf.set_columns(count)

    def add(self, event: dict[str, Any]) -> bool:
        kind = event.get("type")
        if kind == "run_started":
            changed = self._add_devices(event.get("replicas") or [])
            count = event.get("num_replicas")
            if isinstance(count, int) and count > self.replicas:
                self.ensure_replicas(count)
                changed = True
            start = number(event.get("start_step"))
            if not math.isnan(start) and len(self.steps) and self.steps.last(0) > start:
                self.truncate_after(start)
                changed = True
            return changed
        if kind != "step" or not isinstance(event.get("replicas"), list):
            return False
        step = number(event.get("step"))
        if math.isnan(step):
            return False
        if len(self.steps) and step <= self.steps.last(0):
            self.truncate_after(step - 1)
        entries = [e for e in event["replicas"] if isinstance(e, dict) and isinstance(e.get("replica"), int)
                   and e["replica"] >= 0]
        self._add_devices(entries)
        rows = {name: np.full(self.replicas, np.nan) for name in METRICS}
        if event.get("per_worker") and len(self.steps):
            for name in ("loss", "grad_norm"):  # the other workers keep their last value
                rows[name] = self.metrics[name].data[-1].copy()
        for entry in entries:
            for name in METRICS:
                rows[name][entry["replica"]] = number(entry.get(name))
        self.steps.append((step,))
        for name, buf in self.metrics.items():
            buf.append(rows[name])
        return True

    def _add_devices(self, entries: list) -> bool:
        """Learn replica indices and their devices from ``run_started`` or step entries."""
        changed = False
        for entry in entries:
            index = entry.get("replica") if isinstance(entry, dict) else None
            if not isinstance(index, int) or index < 0:
                continue
            if index >= self.replicas:
                self.ensure_replicas(index + 1)
                changed = True
            device = entry.get("device")
            if isinstance(device, str) and device and self.devices[index] != device:
                self.devices[index] = device
                changed = True
            worker = entry.get("worker")
            if isinstance(worker, int) and self.workers[index] != worker:
                self.workers[index] = worker
                changed = True
        return changed

    @property
    def multi_worker(self) -> bool:
        return len({w for w in self.workers if w is not None}) > 1

    def label(self, r: int) -> str:
        return replica_label(self.devices[r], self.workers[r] if self.multi_worker else None)

    def truncate_after(self, step: float) -> None:
        n = int(np.searchsorted(self.steps.column(0), step, side="right"))
        self.steps.truncate(n)
        for buf in self.metrics.values():
            buf.truncate(n)

    def mean_speed(self, window: int = SPEED_WINDOW) -> np.ndarray:
        """Examples/s per replica, mean of the last ``window`` steps (NaN without data)."""
        tail = self.metrics["examples_per_sec"].data[-window:]
        if not len(tail):
            return np.full(self.replicas, np.nan)
        with warnings.catch_warnings():  # all-NaN columns are expected: a replica with no data
            warnings.simplefilter("ignore", RuntimeWarning)
            return np.nanmean(tail, axis=0)

    def slowest(self) -> int | None:
        """The replica with the lowest mean examples/s; None with fewer than two measured."""
        speed = self.mean_speed()
        measured = np.flatnonzero(np.isfinite(speed))
        if len(measured) < 2:
            return None
        return int(measured[np.argmin(speed[measured])])

    def latest_memory(self) -> tuple[np.ndarray, np.ndarray] | None:
        """(in use, peak) bytes per replica at the last step that reported any; None on CPUs."""
        memory = self.metrics["memory_bytes"].data
        rows = np.flatnonzero(np.isfinite(memory).any(axis=1)) if len(memory) else []
        if not len(rows):
            return None
        last = rows[-1]
        return memory[last], self.metrics["peak_memory_bytes"].data[last]
