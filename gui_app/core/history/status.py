"""How a run stands: :class:`RunStatus` for the run list (small and serialisable: the run
directory's summary.json caches it) and :class:`StepProgress` for the progress line (epoch, step
of total, examples/s, time left, or what the engine is busy with before training).

A run's status comes from its events: the last ``run_finished`` says completed, stopped or
failed; a run with no ``run_finished`` after its last ``run_started`` was killed
(``interrupted``); a run with no event yet is ``new``.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from gui_app.core.events import Eval, Event, Progress, RunFinished, RunStarted, Step

RATE_WINDOW_S = 20.0  # the time left follows the speed of the last 20 seconds


@dataclass
class RunStatus:
    """What the run list shows of a run's events."""

    status: str = "new"  # completed | stopped | failed | interrupted | new
    started: float | None = None  # the first run_started's time
    step: int = 0  # the last step reached
    total_steps: int | None = None
    test_accuracy: float | None = None
    message: str | None = None  # why it failed or stopped
    cluster_resumable: bool = False  # a failed cluster: its run_finished says resume can restart it

    def add(self, event: Event) -> bool:
        """Fold one event; True when it changed the status."""
        if isinstance(event, Step):
            self.step = event.step
        elif isinstance(event, RunStarted):
            self.status, self.message, self.cluster_resumable = "interrupted", None, False
            if self.started is None:
                self.started = event.time
            self.total_steps = event.total_steps
        elif isinstance(event, Eval):
            self.test_accuracy = event.accuracy
        elif isinstance(event, RunFinished):
            self.status, self.step, self.message = event.status, event.step, event.message
            self.cluster_resumable = event.resumable
        else:
            return False
        return True


class StepProgress:
    """The progress line's figures. ``latest`` says what it shows: ``started`` (the run has
    started, its first steps compile), ``stage`` (something slow before training: ``stage``),
    ``step`` (training), ``evaluated`` (the evaluation came: the history's ``evaluation``), or
    ``""`` before any of these."""

    def __init__(self) -> None:
        self.latest = ""
        self.total_steps = 0
        self.epochs = 0
        self.step = 0
        self.epoch = 0
        self.examples_per_sec: float | None = None
        self.stage: Progress | None = None
        self._times: deque[tuple[float, int]] = deque()  # (time, step) of the steps in the rate window

    def start(self, run: RunStarted) -> None:
        self.latest = "started"
        self.total_steps, self.epochs, self.step = run.total_steps, run.epochs, run.start_step
        self._times.clear()

    def add_stage(self, event: Progress) -> None:
        self.latest, self.stage = "stage", event

    def add_step(self, event: Step) -> None:
        self.latest = "step"
        self.step, self.epoch, self.examples_per_sec = event.step, event.epoch, event.examples_per_sec
        times = self._times
        times.append((event.time, event.step))
        while len(times) > 2 and times[-1][0] - times[0][0] > RATE_WINDOW_S:
            times.popleft()

    def add_times(self, times: list[float], steps: list[int]) -> None:
        """The rate window's part of :meth:`add_step` for many steps at once (a long run's
        buckets, gui_app/core/history/coarse.py): the rest of each step is the next one's."""
        window = self._times
        for pair in zip(times, steps):
            window.append(pair)
            while len(window) > 2 and window[-1][0] - window[0][0] > RATE_WINDOW_S:
                window.popleft()

    def evaluated(self) -> None:
        self.latest = "evaluated"

    def eta_seconds(self) -> float | None:
        """Seconds left at the speed of the last :data:`RATE_WINDOW_S` seconds; None when unknown."""
        if len(self._times) < 2:
            return None
        (t0, s0), (t1, s1) = self._times[0], self._times[-1]
        if t1 <= t0 or s1 <= s0:
            return None
        return (self.total_steps - s1) * (t1 - t0) / (s1 - s0)
