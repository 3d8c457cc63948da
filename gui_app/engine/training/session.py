"""One training session in this process: set up the input, strategy and model, restore the
newest checkpoint when resuming, announce the run (``run_started``), and run it with the
controller (engine/training/controller.py). Used by ``train``/``resume``, by the parameter-server coordinator
and by every worker of a multi-worker cluster, each passing what differs as objects: the
control (a cluster's agreed one), the data order's seed, actions of its own.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from gui_app.core import rundir
from gui_app.core.config import ConfigError, RunConfig
from gui_app.core.disk import require_free
from gui_app.core.events import ReplicaInfo, RunStarted, Warning
from gui_app.engine.run.control import RunControl, reclaim_signals
from gui_app.engine.run.event_writer import EventWriter
from gui_app.engine.run.failures import BatchShape
from gui_app.engine.training.actions.base import Action
from gui_app.engine.training.context import ModelState, RunContext

if TYPE_CHECKING:
    from gui_app.engine.training.controller import RunController


class TrainingSession:
    """What the error path needs is kept as the session goes: ``batch`` once the strategy is
    built (an out-of-memory message advises on it), ``state`` once the model exists (the step
    reached), ``started`` once the run was announced."""

    def __init__(self, config: RunConfig, run_dir: Path, events: EventWriter, control: RunControl, resume: bool,
                 data_seed: int | None = None):
        self.config, self.run_dir, self.events, self.control = config, run_dir, events, control
        self.resume, self.data_seed = resume, data_seed
        self.batch: BatchShape | None = None
        self.state: ModelState | None = None
        self.started = False

    def step_reached(self) -> int:
        try:
            return self.state.steps_done() if self.state is not None else 0
        except Exception:  # noqa: BLE001 - asked on the error path, which must not raise
            return 0

    def run(self, actions: Sequence[Action] = ()) -> tuple[str, int]:
        """Train (or continue) the run; (``completed`` or ``stopped``, the step reached).
        ``actions`` run after the standard ones, before the checkpoints."""
        from gui_app.engine.training import context

        if self.resume and rundir.read_run(self.run_dir).status == "completed":
            raise ConfigError(f"run_dir: {self.run_dir} has already completed; nothing to resume")
        ctx, state = self.set_up()
        self.batch, self.state = ctx.batch, state
        require_free(self.run_dir, context.state_bytes(state), "one checkpoint and the saved model")
        if self.resume and not context.restore_latest(ctx, state, ctx.warnings):
            ctx.warnings.append("no checkpoint found: the run starts again from step 0")
        self.events.emit(self._run_started(ctx, state))
        self.started = True
        for warning in ctx.warnings:
            self.events.emit(Warning(message=warning))
        return self.controller(ctx, state, actions).run(self.run_dir, self.events), state.steps_done()

    # The parts that are TensorFlow's: what the UI tests' fake engine (tests/ui/fake_training.py)
    # replaces, so that everything around them (the command line, detaching, the run directory,
    # the restore, the events, the checkpoints' schedule, the failures) is the real code.
    def set_up(self) -> tuple[RunContext, ModelState]:
        """The runtime, the input, the strategy, then the model with its optimizer and checkpoint."""
        from gui_app.engine.training import context

        ctx = context.prepare(self.config, self.events.progress, self.run_dir / context.DATA_DIR, self.data_seed)
        reclaim_signals()  # the strategy exists: TensorFlow's own SIGTERM handler may have replaced ours
        self.batch = ctx.batch
        return ctx, context.build_model_state(ctx, self.run_dir)

    def controller(self, ctx: RunContext, state: ModelState, actions: Sequence[Action]) -> RunController:
        """The run's controller: its step runner, its evaluator and every action in order."""
        from gui_app.engine.training.controller import RunController, standard_actions
        from gui_app.engine.training.steps import evaluator, step_runner

        return RunController(ctx, state, step_runner(ctx, state), evaluator(ctx, state), self.control,
                             standard_actions(ctx, state, self.run_dir, self.events, self.control, actions))

    def versions(self) -> dict[str, str]:
        """TensorFlow's, Keras's and Python's versions, for ``run_started``."""
        from gui_app.engine.training.context import versions

        return versions()

    def _run_started(self, ctx: RunContext, state: ModelState) -> RunStarted:
        from gui_app.core.bottleneck import usable_cores
        from gui_app.engine.training.models import describe

        config, built = self.config, ctx.built
        model = describe(state.model)
        return RunStarted(
            run_dir=str(self.run_dir), config=config.to_dict(), resumed=self.resume, start_step=state.steps_done(),
            total_steps=ctx.total_steps, steps_per_epoch=ctx.steps_per_epoch, epochs=config.training.epochs,
            num_replicas=built.num_replicas,
            replicas=[ReplicaInfo(replica=i, worker=w, device=device)
                      for i, (w, device) in enumerate(zip(built.replica_workers, built.devices))],
            num_workers=built.num_workers, global_batch_size=config.training.global_batch_size,
            per_replica_batch_size=config.training.global_batch_size // built.num_replicas,
            dataset=ctx.input.summary(),
            model={key: model[key] for key in ("name", "parameters", "trainable_parameters")},
            strategy={"name": config.strategy.name, "cross_device_ops": built.cross_device_ops, **built.communication},
            versions=self.versions(), data_seed=ctx.data_seed, cpu_cores=usable_cores())
