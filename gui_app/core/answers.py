"""The typed answers of the engine's commands other than the run events: ``sweep status --json``,
the scaling report, ``prepare --json``, ``predict --serve``'s lines, ``log --json`` lines,
``runs --json`` rows and ``hosts fetch --json``. Documented in docs/answers.md (tests/test_answer_docs.py keeps the two
together); tests/test_answer_schema.py checks the writers' lines against these classes.

The JSON is the event codec's (gui_app.core.event_codec): :func:`encode` writes a dataclass's
fields under their names, :func:`decode` reads one back leniently (a missing or mistyped key
takes its default, unknown keys are ignored), so an older or newer engine on a host of the same
release still reads. The wire did not change when these classes came: each field has the key
and the order the hand-written dicts had.

Qt-free and TensorFlow-free.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, TypeVar

from gui_app.core.event_codec import build, fields, optional, plain

A = TypeVar("A")


def encode(answer: Any) -> dict[str, Any]:
    """A JSON-ready dict of an answer: its fields in order, an optional one only when set; NaN and
    infinities as null."""
    return {f.wire: plain(getattr(answer, f.name)) for f in fields(type(answer))
            if not (f.omit and getattr(answer, f.name) == f.default)}


def decode(cls: type[A], value: Any) -> A | None:
    """An answer of ``cls`` from parsed JSON; None when it is not an object or lacks a required key."""
    return build(cls, value) if isinstance(value, dict) else None


def reader(cls: type[A]) -> Callable[[Any], A]:
    """``decode`` for an EngineJob's ``read``: ValueError (said in the window) instead of None."""
    def read(value: Any) -> A:
        answer = decode(cls, value)
        if answer is None:
            raise ValueError(f"not a {cls.__name__} answer")
        return answer
    return read


def problems(cls: type, value: Any, where: str = "") -> list[str]:
    """What is wrong with ``value`` as the engine's answer of ``cls`` (empty when it follows the
    schema): every always-written key present with its JSON type, an optional one when written,
    and each part (a trial, a row) likewise."""
    where = where or cls.__name__
    if not isinstance(value, dict):
        return [f"{where}: not a JSON object"]
    out = []
    for f in fields(cls):
        if f.wire not in value:
            if not f.omit:
                out.append(f"{where}: missing {f.wire!r}")
            continue
        v = value[f.wire]
        if isinstance(v, bool) and bool not in f.json_types and object not in f.json_types:
            out.append(f"{where}: {f.wire!r} is a boolean")  # JSON true is not a number
        elif not isinstance(v, f.json_types):
            out.append(f"{where}: {f.wire!r} is {type(v).__name__}")
        elif f.part is not None:
            parts = v if isinstance(v, list) else [v] if isinstance(v, dict) else []
            for i, part in enumerate(parts):
                out += problems(f.part, part, f"{where}.{f.wire}[{i}]" if isinstance(v, list) else f"{where}.{f.wire}")
    return out


# ---- sweep status --json -------------------------------------------------------------------------
@dataclass
class SweepTrial:
    number: int
    state: str = "running"  # running, completed, pruned, failed, stopped
    parameters: dict[str, Any] = field(default_factory=dict)
    metric: float | None = None  # the sweep's metric: the told value, else the run's latest figure
    epochs: int = 0  # epochs the run has finished
    run_dir: str | None = None
    device: str | None = None
    duration: float | None = None  # seconds from the trial's start to its end (or to now)
    message: str | None = None
    host: str | None = None  # the SSH host it ran on; None: this machine
    job: str | None = None  # its Slurm job (a sweep whose trials are Slurm jobs)
    job_state: str | None = None  # what Slurm says of it: "pending (Resources)", "running", "cancelled"


@dataclass
class SweepStatus:
    sweep_dir: str
    metric: str = "val_accuracy"
    direction: str = "maximize"
    running: bool = False  # the sweep's own process runs
    stop_asked: bool = False
    best: SweepTrial | None = None
    trials: list[SweepTrial] = field(default_factory=list)
    importance: dict[str, float] = field(default_factory=dict)  # parameter -> importance, most first

    def trial(self, number: int) -> SweepTrial | None:
        return next((t for t in self.trials if t.number == number), None)


# ---- the scaling report (scaling.json; with --json also the last stdout line) ------------------
@dataclass
class TimeSplit:
    compute: float = 0.0  # shares of the step
    input: float = 0.0
    other: float = 0.0


@dataclass
class ScalingRow:
    label: str
    strategy: dict[str, Any] = field(default_factory=dict)  # the config's strategy section
    replicas: int = 1
    examples_per_sec: float | None = None
    eval_examples_per_sec: float | None = None
    speedup: float | None = None  # against the report's baseline
    ideal: float | None = None
    efficiency: float | None = None
    steps: int = 0
    time_split: TimeSplit | None = None
    loss: float | None = None
    devices: list[str] = field(default_factory=list)
    error: str | None = None

    @property
    def family(self) -> str:
        """The strategy's name (a row's line on the speed-up chart)."""
        return str(self.strategy.get("name", ""))


@dataclass
class OptionRow:
    label: str
    group: str | None = None
    option: str | None = None
    strategy: dict[str, Any] = field(default_factory=dict)
    training: dict[str, Any] = field(default_factory=dict)
    replicas: int = 1
    examples_per_sec: float | None = None
    speed_vs_baseline: float | None = None
    loss: float | None = None
    loss_vs_baseline: float | None = None
    loss_comparable: bool = True
    steps: int = 0
    time_split: TimeSplit | None = None
    devices: list[str] = field(default_factory=list)
    error: str | None = None


@dataclass
class ScalingReport:
    TYPE = "scaling_report"
    type: str | None = optional()  # "scaling_report" on stdout; not in scaling.json
    path: str | None = optional()  # scaling.json, on stdout
    version: int = 1
    on_gpus: bool = False
    rows: list[ScalingRow] = field(default_factory=list)
    options: list[OptionRow] = field(default_factory=list)  # a version-1 report has none
    baseline: str | None = None
    recommendation: str = ""


# ---- prepare --json --------------------------------------------------------------------------------
@dataclass
class Prepared:
    TYPE = "prepared"
    type: str
    output: str
    counts: dict[str, int] = field(default_factory=dict)  # images per split: train, test
    classes: int = 0
    shards: int = 0
    seconds: float = 0.0
    images_per_sec: float = 0.0

    @property
    def train(self) -> int:
        return int(self.counts.get("train", 0))

    @property
    def test(self) -> int:
        return int(self.counts.get("test", 0))


# ---- predict --serve -------------------------------------------------------------------------------
@dataclass
class ServeReady:
    TYPE = "ready"
    type: str
    model: str = ""
    kind: str = ""
    class_names: list[str] = field(default_factory=list)
    input_shape: list[int] = field(default_factory=list)  # height, width, channels
    warnings: list[str] = field(default_factory=list)
    has_test_set: bool = False
    dark_background: bool = False


@dataclass
class ServeAnswer:
    """One answer to a request: ``predictions`` (each :meth:`gui_app.core.predictions.Prediction.to_dict`)
    or ``error`` (of one image, or of a request not understood)."""
    type: str
    id: int | str | None = None  # the request's id, as sent (the window sends numbers)
    predictions: list[dict[str, Any]] | None = optional()
    image: str | None = optional()  # an error's image
    message: str | None = optional()  # an error's words


# ---- log --json ------------------------------------------------------------------------------------
@dataclass
class LogLine:
    """A line of the run's log and the byte offset after it; a line of ``next`` alone says where
    the log ends when the reader asked from its end."""
    TYPE = "log"
    type: str
    line: str | None = optional()
    next: int = field(kw_only=True)  # required, and last on the wire as it always was


# ---- runs --json -----------------------------------------------------------------------------------
@dataclass
class RunRow:
    run_dir: str
    name: str = ""
    status: str = "new"
    step: int = 0
    total_steps: int | None = None
    started: float | None = None
    test_accuracy: float | None = None
    message: str | None = None
    pid: int | None = None  # of the process running it
    host: str | None = None  # where that process runs
    detached: bool | None = None
    config: dict[str, Any] | None = None
    has_model: bool = False
    resumable: bool = False
    slurm_job: str | None = None
    kubernetes_job: str | None = None
    owner: str | None = None  # the user the run's folder belongs to
    own: bool = True  # whether that is the user asking


# ---- devices --json --------------------------------------------------------------------------------
@dataclass
class GpuInfo:
    name: str  # GPU:0
    description: str = "GPU"
    memory_bytes: int | float | None = None
    compute_capability: list[int] | None = None  # major, minor

    def describe(self) -> str:
        """``NVIDIA A100 · 40.0 GiB · compute 8.0``."""
        parts = [self.description or "GPU"]
        if self.memory_bytes:
            parts.append(f"{self.memory_bytes / 2**30:.1f} GiB")
        if self.compute_capability and len(self.compute_capability) == 2:
            parts.append(f"compute {self.compute_capability[0]}.{self.compute_capability[1]}")
        return " · ".join(parts)


@dataclass
class CpuInfo:
    name: str = "CPU:0"
    description: str = "processor"
    cores: int | None = None

    def describe(self) -> str:
        return f"{self.description or 'processor'}" + (f", {self.cores} cores" if self.cores else "")


@dataclass
class LogicalDevice:
    name: str
    type: str = ""


@dataclass
class DevicesInfo:
    tensorflow: str = "?"
    keras: str = "?"
    python: str = ""
    gpus: list[GpuInfo] = field(default_factory=list)
    cpu: CpuInfo = field(default_factory=CpuInfo)
    logical_devices: list[LogicalDevice] = field(default_factory=list)
    nccl_available: bool = False
    cuda_build: bool = False
    nvml: list[dict[str, Any]] | None = None  # NVML's figures of each NVIDIA GPU; null without a driver


# ---- diagnose --json ------------------------------------------------------------------------------
@dataclass
class Finding:
    """One thing wrong with a run (gui_app/core/diagnosis.py, docs/diagnose.md): ``kind`` and its
    sentence; every key is written, null where it is not of the finding's kind."""
    kind: str  # non_finite | stall | straggler | input_bound
    message: str
    step: int | None = None  # non_finite: the first non-finite step
    worker: int | None = None
    replica: int | None = None
    first: str | None = None  # non_finite: loss | gradients | weights
    replicas: list[int] | None = None  # non_finite: every replica non-finite at ``step``
    grad_norms: list[list[float]] | None = None  # non_finite: [step, norm] of ``replica`` before it
    growth: float | None = None  # non_finite: how many times the norm grew over that window
    learning_rate: float | None = None
    checkpoint: str | None = None  # non_finite: the last good checkpoint kept (absent: none)
    layer: str | None = None  # non_finite: the first layer (variable) non-finite in the replay
    layer_part: str | None = None  # non_finite: activations | gradients | all_reduced_gradients | weights
    examples: list[int] | None = None  # non_finite: the batch's examples whose loss alone is non-finite
    replayed: bool | None = None  # non_finite: the replay found it again (null: not tried)
    since_step: int | None = None  # stall: the last step finished
    seconds: float | None = None  # stall: since that step; input_bound: the median wait per step
    expected_seconds: float | None = None  # stall: the recent time between two step groups
    pid: int | None = None  # stall: the run's process
    state: str | None = None  # stall: its OS state (running, sleeping, stopped, ...), when readable
    share: float | None = None  # input_bound: the median share of a step spent waiting for input
    steps: int | None = None  # input_bound: steps it was measured over; straggler: steps it was late in
    workers: list[dict] | None = None  # stall (a cluster's): every worker (stall event's ``workers`` entries)
    reason: str | None = None  # stall (a cluster's): why ``worker`` holds the others up
    late_ms: float | None = None  # straggler: how much later than the others it arrives at the all-reduce
    cause: str | None = None  # straggler: compute | input


@dataclass
class Diagnosis:
    run: str
    status: str = "new"  # as ``runs`` says it: running, completed, stopped, failed, ...
    findings: list[Finding] = field(default_factory=list)


# ---- export-run --mlflow DIR_OR_URI --json (docs/mlflow.md) ------------------------------------


@dataclass
class MlflowExport:
    TYPE = "mlflow_export"
    type: str
    run_id: str
    action: str  # created | replaced (the run changed since its last export) | unchanged
    experiment_id: str = ""
    tracking_uri: str = ""
    metrics: int = 0  # metric values in the run (written, or already there when unchanged)
    params: int = 0
    artifacts: int = 0


# ---- rehearse CONFIG --at STEP --json (docs/detached.md, "Rehearse a preemption") ------------------


@dataclass
class Difference:
    """Where a rehearsed run first left its reference: a step (0 for the final state) and what."""
    step: int
    what: str  # "batch of replica 1", "loss 0.41 vs 0.52", "weights model/.../kernel", "missing step"


@dataclass
class Certificate:
    """Whether a run interrupted at a step and resumed is the run that was never interrupted
    (gui_app/core/rehearsal.py compares them; engine/commands/rehearse.py runs them)."""
    equivalent: bool
    steps: int  # steps compared
    batches_identical: bool
    max_loss_diff: float | None
    max_weight_diff: float | None
    first_difference: Difference | None
    reference_run: str
    rehearsed_run: str
    max_optimizer_diff: float | None = None
    tolerance: str = "bitwise"  # bitwise | the rule used (GPU kernels: docs/detached.md)
    strategy: str = ""
    signal: str = ""  # TERM | KILL
    worker: int | None = None  # the cluster worker signalled; null: the run's process
    at: int = 0  # the step asked for
    interrupted_at: int | None = None  # the last step the interrupted run had told before it ended
    resumed_from: int | None = None  # the step its resume started from (its newest checkpoint)
    cannot_certify: str | None = None  # why this combination cannot be equivalent (nothing was run)
    seconds: float = 0.0  # wall time of the whole rehearsal


# ---- hosts fetch HOST PATH --to DIR --json (docs/hosts.md) -----------------------------------------
@dataclass
class Fetched:
    TYPE = "fetched"
    type: str
    path: str  # where the copy is here: DIR/its name


ANSWERS: tuple[type, ...] = (SweepStatus, ScalingReport, Prepared, ServeReady, ServeAnswer, LogLine, RunRow,
                             DevicesInfo, Diagnosis, MlflowExport, Certificate, Fetched)
