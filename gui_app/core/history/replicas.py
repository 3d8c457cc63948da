"""The per-replica numbers of one run: a step column and one ``[steps, replicas]`` buffer per
figure of ``ReplicaStats``, folded from its ``run_started`` and ``step`` events (the Replicas
tab draws them)."""
from __future__ import annotations

import math
import warnings

import numpy as np

from gui_app.core.event_codec import fields
from gui_app.core.events import ReplicaInfo, ReplicaStats, RunStarted, Step
from gui_app.core.history.buffers import GrowableArray, number

SPEED_WINDOW = 20  # examples/s bars show the mean of this many latest steps
# Every figure of a replica's step (ReplicaStats), so a new one is folded with no change here.
METRICS = tuple(f.name for f in fields(ReplicaStats)
                if f.as_is & {int, float} and f.name not in ("replica", "worker"))


def short_device(name: str) -> str:
    """``/job:localhost/replica:0/task:0/device:GPU:1`` -> ``GPU:1``."""
    return name.split("device:")[-1] if name else "?"


def replica_label(device: str, worker: int | None) -> str:
    """``CPU:0``, or ``1/CPU:0`` for replica CPU:0 of worker 1 in a multi-worker run."""
    return f"{worker}/{short_device(device)}" if worker is not None else short_device(device)


class ReplicaSeries:
    """Per-replica numbers of one run: a step column and one ``[steps, replicas]`` buffer per
    metric. Steps stay increasing: a resumed ``run_started`` or a replayed step drops the
    points after it. A replica's worker is its task index (0 in a single-process run)."""

    def __init__(self) -> None:
        self.steps = GrowableArray(1)
        self.metrics = {name: GrowableArray(0) for name in METRICS}
        self.devices: list[str] = []
        self.workers: list[int] = []  # the worker (task index) of each replica

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
            self.workers += [0] * (count - self.replicas)
            self.devices += [""] * (count - self.replicas)
            for buf in self.metrics.values():
                buf.set_columns(count)

    def start(self, run: RunStarted) -> bool:
        """A run (or a resumed one) starts: learn its replicas; drop the points after its start."""
        changed = self._add_devices(run.replicas)
        if run.num_replicas > self.replicas:
            self.ensure_replicas(run.num_replicas)
            changed = True
        if len(self.steps) and self.steps.last(0) > run.start_step:
            self.truncate_after(run.start_step)
            changed = True
        return changed

    def add_step(self, event: Step) -> bool:
        if not event.replicas:
            return False
        step = float(event.step)
        if len(self.steps) and step <= self.steps.last(0):
            self.truncate_after(step - 1)
        entries = [e for e in event.replicas if e.replica >= 0]
        self._add_devices(entries)
        count = self.replicas
        rows = {name: [math.nan] * count for name in METRICS}
        if event.per_worker and len(self.steps):
            for name in ("loss", "grad_norm"):  # the other workers keep their last value
                rows[name] = [self.metrics[name].last(r) for r in range(count)]
        for entry in entries:
            for name in METRICS:
                rows[name][entry.replica] = number(getattr(entry, name))
        self.steps.append((step,))
        for name, buf in self.metrics.items():
            buf.append(rows[name])
        return True

    def _add_devices(self, entries: list[ReplicaInfo] | list[ReplicaStats]) -> bool:
        """Learn replica indices, their devices and workers from ``run_started`` or step entries."""
        changed = False
        for entry in entries:
            index = entry.replica
            if index < 0:
                continue
            if index >= self.replicas:
                self.ensure_replicas(index + 1)
                changed = True
            if entry.device and self.devices[index] != entry.device:
                self.devices[index] = entry.device
                changed = True
            if self.workers[index] != entry.worker:
                self.workers[index] = entry.worker
                changed = True
        return changed

    @property
    def multi_worker(self) -> bool:
        return len(set(self.workers)) > 1

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
        rows = np.flatnonzero(np.isfinite(memory).any(axis=1)) if len(memory) else np.zeros(0, np.intp)
        if not len(rows):
            return None
        last = rows[-1]
        return memory[last], self.metrics["peak_memory_bytes"].data[last]
