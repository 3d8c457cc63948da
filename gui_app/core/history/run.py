"""RunHistory: one run as the window shows it, folded once from its events.

Every view of a run reads from here -- the Training tab (``training``, ``input_wait``), the
Replicas tab (``replicas``, ``timing``, ``gpus``), the Evaluation tab (``evaluation``), the
progress line (``progress``), the run list (``status``) -- and none folds events itself, so a new
figure is folded in one place. :meth:`RunHistory.add` folds a batch (the window's live batches,
or a whole events file: gui_app.core.rundir.read_history) and returns the parts it changed, a
bit mask of :class:`Part`; subscribers get the same mask after each batch, so a view redraws
only what changed (napari's evented models, without Qt: this module stays Qt-free).
"""
from __future__ import annotations

import inspect
import weakref
from typing import Any, Callable, Iterable

from gui_app.core.events import (
    Checkpoint,
    Continued,
    EpochEnd,
    Error,
    Eval,
    Event,
    NonFinite,
    Paused,
    Progress,
    RunFinished,
    RunStarted,
    Stall,
    StallCleared,
    Step,
    Warning,
)
from gui_app.core.history.findings import RunFindings
from gui_app.core.history.gpus import GpuSeries
from gui_app.core.history.replicas import ReplicaSeries
from gui_app.core.history.status import RunStatus, StepProgress
from gui_app.core.history.timing import InputWait, StepSplit
from gui_app.core.history.training import TrainingSeries


class Part:
    """The parts of a history, as bits of the mask :meth:`RunHistory.add` returns. Plain ints:
    or-ing enum flags took 1.2 ms per 1,000 steps (two per step), ints 0.05 ms."""

    RUN = 1  # a run (or a resumed one) started: ``started``
    TRAINING = 2
    REPLICAS = 4
    TIMING = 8  # the step-time split and the input wait
    GPUS = 16
    PROGRESS = 32  # ``progress`` and ``status``
    EVALUATION = 64
    FINDINGS = 128  # ``findings``: what ``diagnose`` would say (a non-finite step, a stall)
    ALL = 255


Subscriber = Callable[[int], None]


class RunHistory:
    def __init__(self, smoothing: float = 0.9) -> None:
        self.started: RunStarted | None = None  # the latest run_started (a resumed run has several)
        self.run_dir: str | None = None
        self.training = TrainingSeries(smoothing)
        self.replicas = ReplicaSeries()
        self.timing = StepSplit()
        self.input_wait = InputWait()
        self.gpus = GpuSeries()
        self.status = RunStatus()
        self.progress = StepProgress()
        self.evaluation: Eval | None = None
        self.findings = RunFindings()
        self.evaluation_source = ""  # the file it was read from; "" for the live event
        self.problems: list[str] = []  # what of the run could not be read, one line each
        # Read from its pyramid (rundir.read_long_history): the series hold each bucket's min and
        # max, and a chart zoomed in reads the steps of its range (rundir.read_detail).
        self.coarse = False
        self._subscribers: list[Callable[[], Subscriber | None]] = []  # weak references, see subscribe

    def add(self, events: Iterable[Event]) -> int:
        """Fold a batch of events in order; the :class:`Part` bits it changed (0: nothing)."""
        changed = 0
        for event in events:
            fold = _FOLDS.get(type(event))
            if fold is not None:
                changed |= fold(self, event)
        self._notify(changed)
        return changed

    def set_evaluation(self, evaluation: Eval, source: str = "") -> None:
        """The run's evaluation from its file (eval.json, written with the last ``eval`` event)."""
        self.evaluation, self.evaluation_source = evaluation, source
        self.status.test_accuracy = evaluation.accuracy
        self._notify(Part.EVALUATION)

    def subscribe(self, subscriber: Subscriber) -> None:
        """Call ``subscriber(changed)`` after every batch that changed something. A bound method
        is held weakly, as psygnal holds it: a view and the history it shows form no cycle, so
        a closed view and its history are freed at once, not at the next collection."""
        self._subscribers.append(weakref.WeakMethod(subscriber) if inspect.ismethod(subscriber)
                                 else lambda: subscriber)

    def unsubscribe(self, subscriber: Subscriber) -> None:
        self._subscribers = [ref for ref in self._subscribers if ref() not in (subscriber, None)]

    def _notify(self, changed: int) -> None:
        if changed:
            for ref in list(self._subscribers):
                subscriber = ref()
                if subscriber is not None:
                    subscriber(changed)

    # ---- one fold per event type ------------------------------------------------------------
    def check_stall(self, now: float, pid: int | None, state_of: Callable[[], str | None]) -> bool:
        """The live run's stall finding at ``now`` (see RunFindings.check_stall); subscribers
        get Part.FINDINGS when it appeared, changed or went."""
        changed = self.findings.check_stall(now, pid, state_of)
        if changed:
            self._notify(Part.FINDINGS)
        return changed

    def _step(self, event: Step) -> int:
        self.status.add(event)
        self.progress.add_step(event)
        changed = Part.PROGRESS | (Part.FINDINGS if self.findings.add(event) else 0)
        if self.training.add_step(event):
            changed |= Part.TRAINING
        if self.replicas.add_step(event):
            changed |= Part.REPLICAS
        if self.timing.add_step(event) | self.input_wait.add_step(event):
            changed |= Part.TIMING
        if self.gpus.add_step(event):
            changed |= Part.GPUS
        return changed

    def _epoch_end(self, event: EpochEnd) -> int:
        self.findings.add(event)
        return Part.TRAINING if self.training.add_epoch(event) else 0

    def _diagnosed(self, event: Event) -> int:
        """An event only the findings read (the stall rule reads every event's time, and a pause)."""
        return Part.FINDINGS if self.findings.add(event) else 0

    def _start(self, event: RunStarted) -> int:
        self.started = event
        self.run_dir = event.run_dir or self.run_dir
        self.status.add(event)
        self.progress.start(event)
        self.findings.add(event)
        changed = Part.RUN | Part.PROGRESS | Part.FINDINGS
        if self.training.start(event):
            changed |= Part.TRAINING
        if self.replicas.start(event):
            changed |= Part.REPLICAS
        if self.timing.start(event) | self.input_wait.start(event):
            changed |= Part.TIMING
        if self.gpus.start(event):
            changed |= Part.GPUS
        return changed

    def _stage(self, event: Progress) -> int:
        self.progress.add_stage(event)
        return Part.PROGRESS

    def _evaluated(self, event: Eval) -> int:
        self.evaluation, self.evaluation_source = event, ""
        self.status.add(event)
        self.progress.evaluated()
        return Part.EVALUATION | Part.PROGRESS

    def _finished(self, event: RunFinished) -> int:
        self.status.add(event)
        self.findings.add(event)  # its time: a run that ended is never stalled
        return Part.PROGRESS


# The fold of each event type (the others change nothing shown). A table of the class's own
# functions, not of bound methods: a history holding its bound methods would be a reference
# cycle, freed only by the garbage collector.
_FOLDS: dict[type[Event], Callable[[RunHistory, Any], int]] = {  # each takes its key's events
    Step: RunHistory._step, EpochEnd: RunHistory._epoch_end, RunStarted: RunHistory._start,
    Progress: RunHistory._stage, Eval: RunHistory._evaluated, RunFinished: RunHistory._finished,
    **{kind: RunHistory._diagnosed for kind in (NonFinite, Error, Paused, Continued, Checkpoint, Warning, Stall,
                                                StallCleared)}}
