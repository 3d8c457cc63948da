"""Where the time of each step goes, folded from ``step`` events: per replica its own forward
and backward pass, the wait for input, and the rest of the step (waiting for the slower
replicas, the all-reduce, the optimizer) -- :class:`StepSplit`, the Replicas tab's bars, line
and bottleneck -- and the share of recent time spent waiting for input -- :class:`InputWait`,
the Training tab's input-bound line. Both follow the recent steps only (a window of 50): recent
enough to follow a run that changes (a cache that warms up, an evaluation in between).
"""
from __future__ import annotations

from collections import deque

import numpy as np

from gui_app.core.bottleneck import CpuShare, bottleneck
from gui_app.core.events import RunStarted, Step
from gui_app.core.history.buffers import GrowableArray

WINDOW = 50  # recent steps


class StepSplit:
    """Recent steps' per-replica split, and the run's share of each part per step."""

    def __init__(self, window: int = WINDOW) -> None:
        self._recent: deque[tuple[float, float, list[float]]] = deque(maxlen=window)  # wall, input, computes
        self._splits: deque[tuple[float, float, float]] = deque(maxlen=window)
        self.history = GrowableArray(4)  # step, compute, input, rest shares of the slowest replica's step
        self.replicas = 1  # of the run, for the bottleneck advice
        self.strategy: str | None = None
        self.input_shape: list | None = None
        self.cpu: CpuShare | None = None  # whether a wait for input is CPU contention

    def clear(self) -> None:
        self._recent.clear()
        self._splits.clear()
        self.history.clear()

    def start(self, run: RunStarted) -> bool:
        """A new run starts afresh (a resumed one goes on); True when that emptied the split."""
        self.replicas = run.num_replicas or 1
        self.strategy = (run.strategy or {}).get("name")
        self.input_shape = (run.dataset or {}).get("input_shape")
        self.cpu = CpuShare.of_run(run)
        if run.resumed or not self.steps():
            return False
        self.clear()
        return True

    def add_step(self, event: Step) -> bool:
        split, wall = event.time_split(), event.step_time
        if split is None or wall is None:  # one is None when the other is
            return False
        computes = [r.step_time or 0.0 for r in event.replicas]
        self._recent.append((wall, split[1], computes))
        self._splits.append(split)
        if wall > 0:
            self.history.append([float(event.step), *(s / wall for s in split)])
        return True

    def shares(self) -> tuple[float, float, float] | None:
        """(compute, input, the rest) as fractions of the recent steps' time (slowest replica)."""
        total = sum(sum(s) for s in self._splits)
        if total <= 0:
            return None
        compute, waited, rest = (sum(s[i] for s in self._splits) / total for i in range(3))
        return compute, waited, rest

    def advice(self) -> str | None:
        """What to try when one part dominates the recent steps (core/bottleneck.py), for this
        run's strategy and images."""
        shares = self.shares()
        return bottleneck(*shares, self.replicas, self.strategy, self.input_shape, self.cpu) if shares else None

    def per_replica(self) -> np.ndarray:
        """``[replicas, 3]`` mean seconds per step: own compute, input wait, the rest of the step."""
        replicas = min((len(c) for _, _, c in self._recent), default=0)
        if not replicas:
            return np.zeros((0, 3))
        rows = np.array([[[c[r], waited, max(wall - c[r] - waited, 0.0)] for r in range(replicas)]
                         for wall, waited, c in self._recent])
        return rows.mean(axis=0)

    def steps(self) -> int:
        return len(self._splits)


class InputWait:
    """The share of recent step time spent waiting for input (``input_wait / step_time``)."""

    def __init__(self, window: int = WINDOW) -> None:
        self._steps: deque[tuple[float, float]] = deque(maxlen=window)

    def clear(self) -> None:
        self._steps.clear()

    def start(self, run: RunStarted) -> bool:
        if run.resumed or not self._steps:
            return False
        self.clear()
        return True

    def add_step(self, event: Step) -> bool:
        wait, step_time = event.input_wait, event.step_time
        if wait is None or step_time is None or step_time <= 0:
            return False
        self._steps.append((min(wait, step_time), step_time))
        return True

    def fraction(self) -> float | None:
        total = sum(t for _, t in self._steps)
        return sum(w for w, _ in self._steps) / total if total > 0 else None
