"""The training session of the UI tests' fake engine (tests/ui/fake_engine.py says what it is and
what ``FAKE_ENGINE_MODE`` does): TensorFlow's part of ``train`` and ``resume``, the input, the
model, its checkpoints and its steps, faked under the real run controller and its actions."""
from __future__ import annotations

import json
import os
import signal
import sys
import time
import zipfile
from pathlib import Path
from types import SimpleNamespace

import numpy as np
from fake_engine import CLASSES, MODE, TEST_EXAMPLES, VERSIONS, input_refusal

from gui_app.core.config import RunConfig
from gui_app.core.rundir import CHECKPOINT_DIR
from gui_app.engine.run.exits import exit_now
from gui_app.engine.run.failures import InputError
from gui_app.engine.training.actions.base import Action, StepGroup
from gui_app.engine.training.actions.checkpoints import Checkpoints
from gui_app.engine.training.actions.nan_guard import NanGuard
from gui_app.engine.training.actions.run_events import RunEvents
from gui_app.engine.training.context import ModelState, RunContext
from gui_app.engine.training.controller import RunController
from gui_app.engine.training.evaluation import EvalResult
from gui_app.engine.training.loop import STATS
from gui_app.engine.training.replay import Replay, checkpoint_step
from gui_app.engine.training.session import TrainingSession
from gui_app.engine.training.steps import Row, StepStats

WAIT_LIMIT_S = 120.0  # a run nobody stops (a failed test) ends on its own
STEPS = int(os.environ.get("FAKE_ENGINE_STEPS", "20"))
STEP_SECONDS = float(os.environ.get("FAKE_ENGINE_STEP_SECONDS", "0"))
DIVERGE_STEP = 7  # diverge mode: the step whose loss is NaN


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
