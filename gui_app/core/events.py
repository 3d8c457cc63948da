"""The run event protocol (docs/events.md) as types, with one encode and one decode.

The engine builds an event (``Step(step=3, ...)``) and its writer encodes it as one JSON line
(:func:`encode`); whoever reads lines -- the window where they enter it, the run list, the CLI,
a test -- decodes each once (:func:`decode`) and works with the types from then on. The schema
that the engine and the tests' fake engine are checked against (gui_app/core/event_schema.py) and
the key tables of docs/events.md are derived from these classes, so a new key is added in one place.

Compatibility both ways: a reader ignores keys it does not know, and a key missing from an older
file takes its default (``None`` for a figure that could not be computed), so old run
directories still open. A field whose metadata says ``omit`` is left out of the JSON line while
it has that value (``gpus`` appears only where NVML sees GPUs). ``run_started`` carries the
``protocol`` version; a reader may show a run of a newer protocol as well as it can.

Qt-free and TensorFlow-free: every layer may import it.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, ClassVar

from gui_app.core.event_codec import build, fields, optional, plain
from gui_app.core.gpu_monitor import GpuSample

# 2: typed events; the live run's "resumed" event is now "continued" (read either way).
# 3: lean step lines (gui_app/core/event_lines.py): a step's replica entries leave out the device
# run_started names, worker 0 and null memory, and its figures are written at float32 precision.
PROTOCOL_VERSION = 3
ERROR_KINDS = ("config", "input", "training", "disk", "cluster", "internal")
FINISHED_STATUSES = ("completed", "stopped", "failed")


# ---- parts of events ------------------------------------------------------------------------
@dataclass(kw_only=True)
class ReplicaInfo:
    """Where one replica runs (``run_started.replicas``)."""

    replica: int
    worker: int = 0
    device: str = ""


@dataclass(kw_only=True)
class ReplicaStats:
    """One replica's local figures of one step, before the all-reduce (``step.replicas``).

    Protocol 3 leaves out ``worker`` when 0, ``device`` when it is the one ``run_started`` names
    for this replica, and the memory figures when null; a reader that saw the ``run_started``
    fills the device back in (gui_app/core/event_lines.py), so both forms decode alike."""

    replica: int
    worker: int = optional(0)
    device: str | None = optional("")
    loss: float | None = None
    accuracy: float | None = None
    examples: int = 0
    grad_norm: float | None = None
    step_time: float | None = None
    examples_per_sec: float | None = None
    memory_bytes: int | None = optional()
    peak_memory_bytes: int | None = optional()
    batch: str | None = optional()  # training.batch_fingerprints: a hash of the batch it trained on
    # Seconds from the step's start on its worker (the previous step's all-reduce done) until this
    # replica's local gradients were ready: its input and compute, when it arrives at the all-reduce.
    ready_time: float | None = optional()


@dataclass(kw_only=True)
class WorkerStatus:
    """One worker of a cluster as the chief sees it during a stall (``stall.workers``)."""

    worker: int
    state: str = "running"  # running | stopped | gone | not answering
    os_state: str | None = None  # from /proc on this machine: "T (stopped)", "S (sleeping)", ...
    phase: str | None = None  # what it said it was doing last (docs/diagnose.md)
    last_step: int | None = None  # the last step it finished
    phase_seconds: float | None = None  # how long it has been in that phase
    stack: list[str] = field(default_factory=list)  # the top of its main thread's Python stack
    host: str | None = None
    pid: int | None = None


@dataclass(kw_only=True)
class ClassMetrics:
    """Precision, recall and F1 of one class (``eval.per_class``); ``class`` on the wire."""

    index: int
    name: str = ""
    precision: float | None = None
    recall: float | None = None
    f1: float | None = None
    support: int = 0

    WIRE_NAMES: ClassVar[dict[str, str]] = {"index": "class"}


# ---- the events ---------------------------------------------------------------------------
@dataclass(kw_only=True)
class Event:
    """What every event has: its ``type`` (the class's ``TYPE``) and ``time`` (Unix seconds,
    set by the writer when left at 0)."""

    TYPE: ClassVar[str] = ""
    time: float = 0.0


@dataclass(kw_only=True)
class RunStarted(Event):
    TYPE: ClassVar[str] = "run_started"
    run_dir: str
    config: dict[str, Any]
    resumed: bool = False
    start_step: int = 0
    total_steps: int = 0
    steps_per_epoch: int = 0
    epochs: int = 0
    num_replicas: int = 1
    replicas: list[ReplicaInfo] = field(default_factory=list)
    num_workers: int = 1
    global_batch_size: int = 0
    per_replica_batch_size: int = 0
    dataset: dict[str, Any] = field(default_factory=dict)
    model: dict[str, Any] = field(default_factory=dict)
    strategy: dict[str, Any] = field(default_factory=dict)
    versions: dict[str, Any] = field(default_factory=dict)
    data_seed: int | None = optional()
    cpu_cores: int | None = optional()  # the cores this process may use: whether its replicas contend
    protocol: int = PROTOCOL_VERSION


@dataclass(kw_only=True)
class Progress(Event):
    """Something slow before (or instead of) training: a download, decoding, joining a cluster,
    an export's or a benchmark's phase. ``done``/``total`` count, ``fraction`` is 0..1."""

    TYPE: ClassVar[str] = "progress"
    stage: str = ""
    what: str | None = optional()
    done: float | None = optional()
    total: float | None = optional()
    fraction: float | None = optional()
    message: str | None = optional()
    images_per_sec: float | None = optional()

    def share(self) -> float | None:
        """How far, 0..1: ``fraction``, else ``done / total``; None when unknown."""
        if self.fraction is not None:
            return self.fraction
        if self.done is not None and self.total:
            return min(1.0, max(0.0, self.done / self.total))
        return None


@dataclass(kw_only=True)
class Step(Event):
    TYPE: ClassVar[str] = "step"
    step: int
    epoch: int = 0
    loss: float | None = None
    accuracy: float | None = None
    learning_rate: float | None = None
    examples_per_sec: float | None = None
    step_time: float | None = None
    input_wait: float | None = optional()
    allreduce_time: float | None = optional()
    replicas: list[ReplicaStats] = field(default_factory=list)
    gpus: list[GpuSample] | None = optional()
    per_worker: bool = optional(False)

    def time_split(self) -> tuple[float, float, float] | None:
        """(compute, input, all-reduce and the rest) seconds of this step: the slowest replica's
        forward and backward pass, the wait for the batch, and what is left of the step's wall
        time. None without the timings."""
        times = [r.step_time for r in self.replicas if r.step_time is not None]
        if self.step_time is None or not times:
            return None
        compute = min(max(times), self.step_time)
        waited = min(self.input_wait, self.step_time - compute) if self.input_wait is not None else 0.0
        waited = max(waited, 0.0)
        return compute, waited, max(self.step_time - compute - waited, 0.0)


@dataclass(kw_only=True)
class EpochEnd(Event):
    TYPE: ClassVar[str] = "epoch_end"
    epoch: int
    step: int = 0
    loss: float | None = None
    accuracy: float | None = None
    val_loss: float | None = None
    val_accuracy: float | None = None
    duration: float | None = None


@dataclass(kw_only=True)
class Checkpoint(Event):
    TYPE: ClassVar[str] = "checkpoint"
    step: int
    path: str = ""


@dataclass(kw_only=True)
class Paused(Event):
    TYPE: ClassVar[str] = "paused"
    step: int = 0


@dataclass(kw_only=True)
class Continued(Event):
    """The live run goes on after a pause (protocol 1 called it ``resumed``)."""

    TYPE: ClassVar[str] = "continued"
    step: int = 0


@dataclass(kw_only=True)
class Eval(Event):
    TYPE: ClassVar[str] = "eval"
    loss: float | None = None
    accuracy: float | None = None
    examples: int = 0
    confusion_matrix: list[list[int]] = field(default_factory=list)
    class_names: list[str] = field(default_factory=list)
    per_class: list[ClassMetrics] = field(default_factory=list)
    examples_per_replica: list[int] = field(default_factory=list)
    duration: float | None = optional()
    examples_per_sec: float | None = optional()


@dataclass(kw_only=True)
class Warning(Event):  # the protocol's name (it shadows builtins.Warning, never needed here)
    TYPE: ClassVar[str] = "warning"
    message: str
    restart: int | None = optional()
    worker: int | None = optional()
    step: int | None = optional()


@dataclass(kw_only=True)
class Error(Event):
    TYPE: ClassVar[str] = "error"
    message: str
    kind: str = "internal"


@dataclass(kw_only=True)
class NonFinite(Event):
    """Where the NaN guard (or the checkpoints' weight check) found the first non-finite value,
    written just before the run's ``error``: the evidence ``diagnose`` reads (docs/diagnose.md).
    The group's finite steps before ``step`` are written as ``step`` events first."""

    TYPE: ClassVar[str] = "non_finite"
    step: int
    first: str = "loss"  # loss | gradients | weights: what the recorded figures show went first
    replica: int | None = None  # the first replica non-finite at ``step`` (None: the weights' check)
    worker: int | None = None
    replicas: list[int] = field(default_factory=list)  # every replica non-finite at ``step``
    loss: float | None = None  # ``replica``'s figures at ``step`` (null where not finite)
    grad_norm: float | None = None
    checkpoint: str | None = None  # the last good checkpoint kept; None: none was written
    # The replay of the steps from ``checkpoint`` on one device (engine/training/replay.py):
    replayed: bool | None = optional()  # it found the non-finite value again; None: not tried
    replay_note: str | None = optional()  # why it was not replayed, gave up or stayed finite
    replay_step: int | None = optional()  # the step where the replay found the first non-finite value
    layer: str | None = optional()  # the first variable (or layer) in model order non-finite there
    layer_part: str | None = optional()  # activations | gradients | all_reduced_gradients | weights
    examples: list[int] | None = optional()  # the batch's examples whose loss alone is non-finite (the first 10)
    examples_count: int | None = optional()  # how many of the batch's are
    replay_seconds: float | None = optional()


@dataclass(kw_only=True)
class Stall(Event):
    """A cluster's chief found that no step has finished for much longer than the recent steps
    took, while it happens: who holds the others up and what every worker is doing."""

    TYPE: ClassVar[str] = "stall"
    worker: int | None = None  # the worker holding the others up; None: none stands out
    reason: str = ""  # why that worker
    since_step: int = 0  # the last step the cluster finished
    seconds: float = 0.0  # since that step
    expected_seconds: float | None = None  # a step group took this long recently
    workers: list[WorkerStatus] = field(default_factory=list)


@dataclass(kw_only=True)
class StallCleared(Event):
    """Steps flow again after a ``stall``."""

    TYPE: ClassVar[str] = "stall_cleared"
    step: int = 0  # the first step finished after it
    seconds: float = 0.0  # how long no step finished


@dataclass(kw_only=True)
class RunFinished(Event):
    TYPE: ClassVar[str] = "run_finished"
    status: str
    run_dir: str | None = None
    step: int = 0
    message: str | None = optional()
    resumable: bool = optional(False)


EVENT_TYPES: dict[str, type[Event]] = {
    cls.TYPE: cls for cls in (RunStarted, Progress, Step, EpochEnd, Checkpoint, Paused, Continued, Eval, Warning,
                              NonFinite, Stall, StallCleared, Error, RunFinished)
}
_OLD_NAMES = {"resumed": Continued}  # protocol 1


# ---- encode and decode ------------------------------------------------------------------------
def encode(event: Event) -> dict[str, Any]:
    """The JSON object of one event: ``type``, ``time``, then its fields (optional ones only when
    they are set); NaN and infinities become null."""
    out: dict[str, Any] = {"type": event.TYPE, "time": event.time}
    for f in fields(type(event)):
        value = getattr(event, f.name)
        if f.name == "time" or (f.omit and value == f.default):
            continue
        out[f.wire] = plain(value)
    return out


def decode(value: Any, parts: bool = True) -> Event | None:
    """The event a JSON object holds, or None when it is not one we know (another program's
    line, a newer type). Unknown keys are ignored; missing or mistyped ones take their default,
    and an event without one of its required keys is None.

    ``parts=False`` leaves the nested parts (a step's ``replicas`` and ``gpus``, an evaluation's
    ``per_class``, a run's ``replicas``) empty: for a reader that needs only each event's own
    figures, as the run list does over every line of every run (a step event of two replicas
    then decodes in about a third of the time)."""
    if not isinstance(value, dict):
        return None
    kind = value.get("type")
    cls = EVENT_TYPES.get(kind) or _OLD_NAMES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        return None
    return build(cls, value, parts)


def decode_line(line: str | bytes, parts: bool = True) -> Event | None:
    """The event one JSON line holds; None for a line that is not one (blank, torn by a process
    that died mid-write, another program's output, a newer type). ``parts`` as for :func:`decode`."""
    try:
        return decode(json.loads(line), parts)
    except (ValueError, RecursionError):  # not JSON, or nested deeper than any event
        return None
