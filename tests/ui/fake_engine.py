"""The real engine's command line over a fake of TensorFlow's part: the UI tests' engine, in milliseconds.

``python tests/ui/fake_engine.py COMMAND ...`` runs ``gui_app.engine.commands.cli.main`` -- the real
parser, ``--detach`` (engine/run/detach.py), the run directory's name, lock, ``process.json``,
control channel and ``engine.log``, the event writer, the restore of the newest checkpoint, the
checkpoints' schedule, the NaN guard, ``eval.json``, the failures' lines and exit codes -- with
one seam replaced: the training session's two TensorFlow parts (``TrainingSession.set_up`` and
``.controller``, engine/training/session.py). :class:`FakeSession` builds the input, model and
checkpoint state from small stand-ins, and gives the real run controller a step runner that
computes each step's figures instead of training (Lightning's BoringModel: a fake model, the real
plumbing). Its checkpoints are ``checkpoints/ckpt-N.index`` files holding the step and the data
seed, so that ``resume`` restores through the real ``context.restore_latest``. Nothing imports
TensorFlow (~6 s); tests/test_event_schema.py checks the events against the protocol's schema.

``FAKE_ENGINE_MODE`` picks a behaviour (each "after step 3" counts the steps of this process):

    normal   train the configured number of steps, evaluate, finish completed
    wait     after step 3, wait for a control word before each step (stop, pause, continue)
    crash    after step 3, print a Python error on stderr and exit 1 without run_finished
    killed   after step 3, print a TensorFlow log line on stderr, then die by SIGKILL
    hang     like wait, but ignore stop (the supervisor must kill it)
    refuse   fail after run_started, before the first step, as a batch TensorFlow cannot decode
             does (an InvalidArgumentError: kind training, exit 1, the run directory kept)
    gpu      like normal, and ``devices`` reports one GPU
    diverge  replica 1's gradient norm grows 10x a step, and at step 7 its loss is NaN: the real
             NaN guard tells the finite steps, ``non_finite`` (the replay "found" layer ``logits``
             and example 17), an ``error`` (kind training) and ``run_finished`` failed, exit 1
    stall    like normal, but silent after step 3 for ``FAKE_ENGINE_STALL_SECONDS`` (default 2), or,
             with ``FAKE_ENGINE_STALL_UNTIL`` set to a FIFO the test made, until the test writes to
             it (a test that waits for the window to see the stall must not race a fixed silence
             against its own start-up on a loaded machine)

``FAKE_ENGINE_STEPS`` sets the number of training steps (default 20, spread over the config's
epochs), ``FAKE_ENGINE_STEP_SECONDS`` how long each takes (default 0). A bad dataset or model file
is refused by the real loaders' checks (numpy only), the way the real engine refuses it.

``devices`` is the real command over a fake device detection (one GPU in ``gpu`` mode);
``inspect``, ``scaling``, ``prepare`` and ``rehearse`` stay small fakes (the real ones build
models); ``sweep`` is tests/ui/fake_sweep.py. Every other command (``attach``, ``stop``, ``runs``,
...) is the real one. Tests run it from any folder: it puts its own checkout first on the path.
"""
from __future__ import annotations

import json
import os
import platform
import signal
import sys
import time
import zipfile
from pathlib import Path
from types import SimpleNamespace

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

# (after the line above: the checkout first on the path)
from gui_app.core.config import RunConfig  # noqa: E402
from gui_app.core.image_files import source_images  # noqa: E402  (as the real inspect reports them)
from gui_app.core.rundir import CHECKPOINT_DIR  # noqa: E402
from gui_app.engine.commands import train as train_command  # noqa: E402
from gui_app.engine.run.exits import RUN_COMMANDS, exit_now  # noqa: E402
from gui_app.engine.run.failures import InputError  # noqa: E402
from gui_app.engine.training.actions.base import Action, StepGroup  # noqa: E402
from gui_app.engine.training.actions.checkpoints import Checkpoints  # noqa: E402
from gui_app.engine.training.actions.nan_guard import NanGuard  # noqa: E402
from gui_app.engine.training.actions.run_events import RunEvents  # noqa: E402
from gui_app.engine.training.context import NUMPY_DATASETS, ModelState, RunContext  # noqa: E402
from gui_app.engine.training.controller import RunController  # noqa: E402
from gui_app.engine.training.evaluation import EvalResult  # noqa: E402
from gui_app.engine.training.loop import STATS  # noqa: E402
from gui_app.engine.training.replay import Replay, checkpoint_step  # noqa: E402
from gui_app.engine.training.session import TrainingSession  # noqa: E402
from gui_app.engine.training.steps import Row, StepStats  # noqa: E402

MODE = os.environ.get("FAKE_ENGINE_MODE", "normal")
WAIT_LIMIT_S = 120.0  # a run nobody stops (a failed test) ends on its own
STEPS = int(os.environ.get("FAKE_ENGINE_STEPS", "20"))
STEP_SECONDS = float(os.environ.get("FAKE_ENGINE_STEP_SECONDS", "0"))
CLASSES = [str(i) for i in range(10)]
TEST_EXAMPLES = 50
DIVERGE_STEP = 7  # diverge mode: the step whose loss is NaN
VERSIONS = {"tensorflow": "2.21.0", "keras": "3.15.1", "python": platform.python_version()}


# ---- the session: TensorFlow's part of train and resume ----------------------------------------
class FakeSession(TrainingSession):
    def set_up(self) -> tuple[RunContext, ModelState]:
        config = self.config
        refused = input_refusal(config)
        if refused:
            raise InputError(refused)
        devices = list(config.strategy.devices) or [config.strategy.device or "CPU:0"]
        built = SimpleNamespace(strategy=None, num_replicas=len(devices), num_workers=1, devices=devices,
                                replica_workers=[0] * len(devices), cross_device_ops=None, communication={},
                                coordinator=None)
        seed = self.data_seed if self.data_seed is not None else (config.training.seed or 0)
        ctx = RunContext(config, FakeInput(config), built, seed)  # type: ignore[arg-type]
        self.batch = ctx.batch
        step, seed_var = Counter(0), Counter(seed)
        files = CheckpointFiles(self.run_dir / CHECKPOINT_DIR, step, seed_var)
        model = FakeModel(config.model.name)
        return ctx, ModelState(model, SimpleNamespace(variables=[]), lambda steps: 0.001,  # type: ignore[arg-type]
                               step, seed_var, files, files)  # type: ignore[arg-type]

    def controller(self, ctx, state, actions):
        """The real controller and the real actions, but TensorBoard's and the GPU sampler's."""
        told = RunEvents(self.events, SimpleNamespace(replica_memory=list, latest=lambda: None))
        replayer = SimpleNamespace(explain=lambda step: Replay(True, step=step, layer="logits", part="activations",
                                                               examples=[17], examples_count=1, seconds=0.4))
        guard = NanGuard(state, told, gradients=not self.config.training.mixed_precision, replayer=replayer)
        checkpoints = Checkpoints(state, self.events, self.control, self.config.training, agreed=False,
                                  replayer=replayer)
        steps = FakeSteps(ctx, state)
        return RunController(ctx, state, steps, FakeEvaluator(ctx, state), self.control,
                             [guard, told, Behaviour(self.control, state.steps_done()), *actions, checkpoints])

    def versions(self) -> dict[str, str]:
        return VERSIONS


def input_refusal(config: RunConfig) -> str | None:
    """The real engine's line for a dataset or model file it refuses before TensorFlow starts."""
    from gui_app.engine.datasets import DatasetError, load_dataset
    from gui_app.engine.training.models import keras_file_refusal

    if config.dataset.name in NUMPY_DATASETS and (config.dataset.path or config.dataset.name == "digits"):
        try:
            load_dataset(config.dataset, None)  # local files only (no download)
        except DatasetError as exc:
            return str(exc)
    if config.model.name == "keras_file" and config.model.path:
        return keras_file_refusal(config.model.path)
    return None


class Counter:
    """What the engine asks of its int64 ``tf.Variable``s (the step, the data seed)."""

    def __init__(self, value: int):
        self.value = int(value)

    def numpy(self) -> int:
        return self.value

    def assign_add(self, k: int) -> None:
        self.value += int(k)


class CheckpointFiles:
    """``tf.train.CheckpointManager`` and ``tf.train.Checkpoint`` at once: ``ckpt-N.index`` files in
    the run's checkpoint folder, each the step and the data seed (what a resume restores)."""

    def __init__(self, folder: Path, step: Counter, seed: Counter):
        self.directory, self.step, self.seed = str(folder), step, seed

    @property
    def checkpoints(self) -> list[str]:
        found = [str(p.with_suffix("")) for p in Path(self.directory).glob("ckpt-*.index")]
        return sorted(found, key=lambda p: int(p.rsplit("-", 1)[-1]))

    @property
    def latest_checkpoint(self) -> str | None:
        return (self.checkpoints or [None])[-1]

    def save(self, checkpoint_number: int) -> str:
        os.makedirs(self.directory, exist_ok=True)
        path = os.path.join(self.directory, f"ckpt-{checkpoint_number}")
        Path(path + ".index").write_text(json.dumps({"step": self.step.value, "data_seed": self.seed.value}))
        return path

    def restore(self, path: str) -> SimpleNamespace:
        """An empty file (what the tests' made-up runs hold) is the step of its name; one that is
        not JSON is damaged (the real restore skips it and says so)."""
        text = Path(path + ".index").read_text()
        saved = json.loads(text) if text else {"step": checkpoint_step(path), "data_seed": self.seed.value}
        self.step.value, self.seed.value = int(saved["step"]), int(saved["data_seed"])
        return SimpleNamespace(assert_consumed=lambda: None)


class Weight:
    def __init__(self, size: int):
        self.shape, self.dtype = (size,), "float32"

    def numpy(self) -> np.ndarray:
        return np.zeros(self.shape, np.float32)


class FakeModel:
    """What ``describe``, the checkpoints' weight check and the run's end ask of a Keras model."""

    def __init__(self, name: str):
        conv, dense = Weight(80), Weight(1154)
        self.name, self.weights, self.variables, self.trainable_weights = name, [conv, dense], [conv, dense], [
            Weight(1200)]
        self.layers = [SimpleNamespace(name="conv", weights=[conv], output=SimpleNamespace(shape=[None, 6, 6, 8])),
                       SimpleNamespace(name="dense", weights=[dense], output=SimpleNamespace(shape=[None, 10]))]

    def save(self, path: Path) -> None:
        with zipfile.ZipFile(path, "w") as archive:  # a zip, as a .keras file is; no model in it
            archive.writestr("fake_engine.txt", "tests/ui/fake_engine.py trained no model")


class FakeInput:
    """The input source: FAKE_ENGINE_STEPS steps over the config's epochs."""

    def __init__(self, config: RunConfig):
        self.name, self.warnings = config.dataset.name, []
        self.class_names, self.num_classes, self.input_shape = CLASSES, len(CLASSES), (8, 8, 1)
        self.train_examples = max(1, STEPS // config.training.epochs) * config.training.global_batch_size

    def summary(self) -> dict:
        return {"name": self.name, "class_names": CLASSES, "input_shape": [8, 8, 1], "train_examples": 1000,
                "validation_examples": 100, "test_examples": TEST_EXAMPLES}

    def validation(self, strategy) -> str:
        return "validation"

    def test(self, strategy) -> str:
        return "test"


class FakeEvaluator:
    strategy = None

    def __init__(self, ctx: RunContext, state: ModelState):
        self.replicas, self.state = ctx.built.num_replicas, state

    def evaluate(self, batches: str, keep_predictions: bool = False) -> EvalResult:
        matrix = np.diag([5] * len(CLASSES))
        matrix[0][1], matrix[0][0] = 1, 4
        per_replica = [TEST_EXAMPLES // self.replicas] * self.replicas
        if batches == "validation":
            return EvalResult(2.3 / max(1, self.state.steps_done()), 0.6, 100, matrix, per_replica)
        return EvalResult(0.1, 0.98, TEST_EXAMPLES, matrix, per_replica)


class FakeSteps:
    """The step runner: each step's figures computed, not trained (one step a group, as slow steps are)."""

    group_limit, fixed_groups = 1, False

    def __init__(self, ctx: RunContext, state: ModelState):
        self.state, self.total = state, ctx.total_steps
        built = ctx.built
        self.rows = [Row(r, w, d) for r, (w, d) in enumerate(zip(built.replica_workers, built.devices))]
        self.examples = ctx.config.training.global_batch_size // built.num_replicas

    def start_epoch(self, epoch: int, start_batch: int) -> None:
        pass

    def run(self, k: int) -> StepStats:
        if MODE == "refuse":
            raise InvalidArgumentError("the input was refused on purpose")
        started = time.perf_counter()
        time.sleep(STEP_SECONDS * k)
        first = self.state.steps_done() + 1
        values = np.array([[self._figures(step, row.replica) for row in self.rows] for step in range(first, first + k)])
        assert values.shape[-1] == len(STATS)
        return StepStats(values, [self.rows] * k, max(time.perf_counter() - started, 0.01 * k))

    def _figures(self, step: int, replica: int) -> list[float]:
        diverging = MODE == "diverge" and replica == min(1, len(self.rows) - 1)
        loss = float("nan") if diverging and step >= DIVERGE_STEP else 2.3 / step * (1 + 0.1 * replica)
        grad_norm = 10.0 ** step if diverging else 1.0 / step  # diverge: the learning rate's 10x a step
        return [loss, min(1.0, step / self.total), self.examples, grad_norm, 0.01 * (1 + replica), -1.0]

    def close(self) -> None:
        pass


class InvalidArgumentError(Exception):
    """What TensorFlow raises for a batch it cannot decode; the engine knows TensorFlow's errors by
    their module (engine/run/failures.py)."""


InvalidArgumentError.__module__ = "tensorflow.python.framework.errors_impl"


class Behaviour(Action):
    """What FAKE_ENGINE_MODE makes of the run after its third step, between the step events and
    the checkpoints (``wait`` and ``hang`` hold it there until a control word)."""

    def __init__(self, control, start: int):
        self.control, self.start = control, start

    def on_steps(self, group: StepGroup) -> None:
        done = group.last_step - self.start
        if done < 3:
            return
        if MODE == "crash":
            sys.stderr.write('Traceback (most recent call last):\n  File "x", line 1\n'
                             "RuntimeError: fake engine crashed on purpose\n")
            exit_now(1)
        if MODE == "killed":
            sys.stderr.write("E0000 cuda_platform.cc:52] failed call to cuInit: INTERNAL: CUDA error\n")
            sys.stderr.flush()
            os.kill(os.getpid(), signal.SIGKILL)
        if MODE == "stall" and done == 3:
            release = os.environ.get("FAKE_ENGINE_STALL_UNTIL")
            if release:
                # Blocked in open() until the test writes: asleep in /proc the whole time (a 20 ms
                # poll was sometimes caught runnable on a loaded machine, and the stall said "running").
                with open(release) as fifo:
                    fifo.read()
            else:
                time.sleep(float(os.environ.get("FAKE_ENGINE_STALL_SECONDS", "2")))
        if MODE in ("wait", "hang"):
            self._hold()

    def on_continue(self, step: int) -> None:
        if MODE in ("wait", "hang"):
            self._hold()

    def _hold(self) -> None:
        """Until a word comes (``hang``: none ever does): the real controller then pauses or stops."""
        deadline = time.monotonic() + WAIT_LIMIT_S
        while MODE == "hang" or not (self.control.stop_requested or self.control.paused):
            if time.monotonic() > deadline:
                exit_now(1)
            time.sleep(0.005)


# ---- devices: the real command over a fake detection ---------------------------------------------
def detect() -> dict:
    gpus = []
    if MODE == "gpu":
        gpus = [{"name": "GPU:0", "description": "NVIDIA Fake 4090", "memory_bytes": 24 * 2**30,
                 "compute_capability": [8, 9]}]
    logical = [{"name": "/device:CPU:0", "type": "CPU"}] + [{"name": "/device:GPU:0", "type": "GPU"} for _ in gpus]
    return {**VERSIONS, "gpus": gpus, "cpu": {"name": "CPU:0", "description": "Fake CPU", "cores": 2},
            "logical_devices": logical, "nccl_available": False, "cuda_build": bool(gpus)}


# ---- the tools: small fakes ------------------------------------------------------------------------
def inspect(config_path, samples_path):
    config = RunConfig.load(config_path)
    problem = input_refusal(config)
    if problem:
        sys.stderr.write("W0000 tensorflow: some warning an engine prints first\n")
        sys.stderr.write(f"replica-studio inspect: {problem}\n")
        return 2
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(10), 3)
    np.savez(samples_path, x=rng.integers(0, 255, size=(30, 8, 8, 1), dtype=np.uint8), y=y)
    print(json.dumps({
        "dataset": {"name": config.dataset.name, "class_names": CLASSES, "input_shape": [8, 8, 1],
                    "train_examples": 1000, "test_examples": TEST_EXAMPLES, "class_counts": [100] * 10,
                    "warnings": [], "source_images": source_images(config.dataset.name, config.dataset.path)},
        "model": {"name": config.model.name, "parameters": 1234, "trainable_parameters": 1200,
                  "layers": [{"name": "conv", "type": "Conv2D", "output_shape": [None, 6, 6, 8], "parameters": 80},
                             {"name": "dense", "type": "Dense", "output_shape": [None, 10], "parameters": 1154}]},
    }))
    return 0


def tool_progress(stage, message, **keys):
    """A ``progress`` line of the tool commands, shaped like gui_app.core.events.Progress."""
    print(json.dumps({"type": "progress", "time": time.time(), "stage": stage, **keys, "message": message}),
          flush=True)


def scaling(argv):
    """``scaling CONFIG ... --output DIR --json``: progress lines, then a report shaped like the
    real one (gui_app.core.scaling.report); ``wait`` mode hangs after the first burst starts."""
    out = argv[argv.index("--output") + 1]
    strategies = argv[argv.index("--strategies") + 1].split(",")
    tool_progress("scaling", f"{strategies[0]}: training", what="bursts", done=0, total=len(strategies),
                  fraction=0.0)
    if MODE == "wait":
        time.sleep(600)
    rows = []
    for n, name in enumerate(strategies):
        replicas = n + 1
        rows.append({"label": f"{name}, {replicas} replicas", "strategy": {"name": name}, "replicas": replicas,
                     "examples_per_sec": 1000.0 * (1 + 0.5 * n), "eval_examples_per_sec": None,
                     "speedup": 1 + 0.5 * n, "ideal": float(replicas), "efficiency": (1 + 0.5 * n) / replicas,
                     "steps": 10, "time_split": {"compute": 0.6, "input": 0.1, "other": 0.3}, "devices": [],
                     "error": None})
    rows.append({"label": "parameter servers", "strategy": {"name": "parameter_server"}, "replicas": 2,
                 "examples_per_sec": None, "eval_examples_per_sec": None, "speedup": None, "ideal": None,
                 "efficiency": None, "steps": 0, "time_split": None, "loss": None, "devices": [],
                 "error": "the ps process did not start"})
    for row in rows[:-1]:
        row["loss"] = 1.25
    options = []
    if "--options" in argv:  # shaped like gui_app.core.scaling_options.option_rows
        for option, speed, loss in (("baseline", 1.0, 1.25), ("all-reduce in float16", 0.9, 1.2504),
                                    ("accumulate 4 micro-batches", 0.8, 1.25),
                                    ("batch 16, no accumulation (reference)", 0.5, 1.6)):
            comparable = "reference" not in option
            options.append({"label": f"mirrored, 2 replicas: {option}", "group": "mirrored, 2 replicas",
                            "option": option, "strategy": {"name": "mirrored"}, "training": {"seed": 1},
                            "replicas": 2, "examples_per_sec": 1500.0 * speed, "speed_vs_baseline": speed,
                            "loss": loss, "loss_vs_baseline": round(loss - 1.25, 6) if comparable else None,
                            "loss_comparable": comparable, "steps": 10,
                            "time_split": {"compute": 0.6, "input": 0.1, "other": 0.3}, "devices": [], "error": None})
    report = {"version": 2, "on_gpus": False, "rows": rows, "options": options, "baseline": rows[0]["label"],
              "recommendation": "Fastest here: the fake."}
    os.makedirs(out, exist_ok=True)
    json.dump(report, open(os.path.join(out, "scaling.json"), "w", encoding="utf-8"))
    from gui_app.core.scaling_options import to_svg  # the real chart of the fake figures (Qt- and TF-free)

    with open(os.path.join(out, "scaling.svg"), "w", encoding="utf-8") as f:
        f.write(to_svg(report))
    tool_progress("scaling", "report written", what="bursts", done=len(strategies), total=len(strategies),
                  fraction=1.0)
    print(json.dumps({"type": "scaling_report", "path": os.path.join(out, "scaling.json"), **report}), flush=True)
    return 0


def prepare(argv):
    """``prepare CONFIG --output DIR [--shards N] --json``: progress lines, then a ``prepared`` line
    shaped like the real ones; a folder that is not empty is refused as the real command does
    (one line, exit 2); ``wait`` mode hangs after the first progress line."""
    out = argv[argv.index("--output") + 1]
    if os.path.exists(out) and os.listdir(out):
        sys.stderr.write(f"replica-studio prepare: --output: {out} exists and is not an empty folder\n")
        return 2
    total = 100
    for done in (0, 40, total):
        tool_progress("write", f"Writing {done:,} of {total:,} images (1,000 images/s)", what="images", done=done,
                      total=total, images_per_sec=1000.0)
        if MODE == "wait":
            time.sleep(600)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "manifest.json"), "w", encoding="utf-8") as f:
        json.dump({"image_shape": [8, 8, 1], "counts": {"train": 80, "test": 20}, "files": []}, f)
    print(json.dumps({"type": "prepared", "output": out, "counts": {"train": 80, "test": 20}, "classes": 10,
                      "shards": 2, "seconds": 0.1, "images_per_sec": 1000.0}), flush=True)
    return 0


def rehearse(argv):
    """``rehearse CONFIG --at STEP ... --json``: after a progress-free wait (``wait`` mode: for
    ever, until cancelled), a certificate shaped like the real one; not equivalent at step 13.
    Its two runs are the folders FAKE_ENGINE_REFERENCE_RUN and FAKE_ENGINE_REHEARSED_RUN name
    (a test writes them), else folders that do not exist."""
    at = int(argv[argv.index("--at") + 1])
    worker = int(argv[argv.index("--worker") + 1]) if "--worker" in argv else None
    while os.environ.get("FAKE_ENGINE_MODE") == "wait":
        time.sleep(0.05)
    first = {"step": at + 1, "what": "batch of replica 0"} if at == 13 else None
    print(json.dumps({"equivalent": first is None, "steps": 40, "batches_identical": first is None,
                      "max_loss_diff": 0.0 if first is None else 0.1, "max_weight_diff": 0.0 if first is None else 0.02,
                      "first_difference": first,
                      "reference_run": os.environ.get("FAKE_ENGINE_REFERENCE_RUN", "/runs/a"),
                      "rehearsed_run": os.environ.get("FAKE_ENGINE_REHEARSED_RUN", "/runs/b"),
                      "strategy": "mirrored", "signal": argv[argv.index("--signal") + 1], "worker": worker, "at": at,
                      "interrupted_at": at + 1, "resumed_from": at - 1}), flush=True)
    return 0 if first is None else 1


def main(argv):
    command = argv[0] if argv else ""
    if command == "sweep":
        from fake_sweep import sweep

        return sweep(argv)
    fakes = {"scaling": scaling, "prepare": prepare, "rehearse": rehearse,
             "inspect": lambda argv: inspect(argv[1], argv[argv.index("--samples") + 1])}
    if command in fakes:
        return fakes[command](argv)
    from gui_app.engine.commands.cli import main as engine_main
    from gui_app.engine.training import devices

    devices.configure_runtime = lambda runtime: []
    devices.detect = detect
    train_command.TrainingSession = FakeSession  # type: ignore[misc]
    code = engine_main(argv)
    if command in RUN_COMMANDS:
        exit_now(code)  # as python -m gui_app.engine ends a run
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
