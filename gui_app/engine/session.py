"""``train``, ``resume`` and ``evaluate``: one engine process, one run directory.

Every path out of here ends with a ``run_finished`` event and an exit code; errors become one
line (an ``error`` event and stderr), never a traceback unless ``--debug``.
"""
from __future__ import annotations

import sys
import traceback
from pathlib import Path

from gui_app.core import rundir
from gui_app.core.config import MULTI_WORKER, ConfigError, RunConfig
from gui_app.engine.exits import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK
from gui_app.engine.cluster import load_config
from gui_app.engine.context import InputError
from gui_app.engine.control import Control
from gui_app.engine.events import EventWriter


class _Finished(Exception):
    def __init__(self, status: str, code: int, message: str | None = None):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    if type(exc).__module__.startswith("tensorflow"):
        # TensorFlow errors carry the op and a graph trace after the first line.
        name = type(exc).__name__
        text = f"{name}: {text.splitlines()[0] if text else ''}"
        if name == "ResourceExhaustedError":
            text = "out of memory: " + text + " (try a smaller training.global_batch_size)"
    return text.splitlines()[0] if text else type(exc).__name__


def _classify(exc: BaseException) -> tuple[str, int]:
    from gui_app.engine.runner import TrainingDiverged

    if isinstance(exc, ConfigError):
        return "config", EXIT_BAD_INPUT
    if getattr(exc, "event_kind", None):  # e.g. a failed cluster (engine/cluster_launch.py)
        return exc.event_kind, exc.exit_code
    if isinstance(exc, InputError):
        return "input", EXIT_BAD_INPUT
    if isinstance(exc, TrainingDiverged) or type(exc).__module__.startswith("tensorflow"):
        return "training", EXIT_FAILED
    return "internal", EXIT_FAILED


def run_command(args, control: Control | None = None, stream=None) -> int:
    """Run one engine command; ``control`` and ``stream`` let tests drive it in-process."""
    events = EventWriter(args.events, stream)
    if control is None:
        control = Control()
        control.install_signal_handlers()
        if args.control == "stdin":
            control.read_stream(sys.stdin)
    run_dir: Path | None = None
    step = 0
    try:
        if args.command == "train":
            config = load_config(args.config, getattr(args, "allow_public_hosts", False))
            runs_dir = Path(args.runs_dir) if args.runs_dir else rundir.default_runs_dir()
            try:
                run_dir = rundir.create_run_dir(runs_dir, config)
            except OSError as exc:
                raise ConfigError(f"--runs-dir: cannot create a run directory in {runs_dir}: "
                                  f"{exc.strerror or exc}") from None
        else:
            run_dir = Path(args.run_dir)
            if not (run_dir / rundir.CONFIG_FILE).is_file():
                raise ConfigError(f"run_dir: {run_dir} is not a run directory (no {rundir.CONFIG_FILE})")
            config = RunConfig.load(run_dir / rundir.CONFIG_FILE)
        events.attach(run_dir)
        if args.command == "evaluate":
            return _evaluate(config, run_dir, events)
        if config.strategy.name == "parameter_server":  # this process coordinates the servers it starts
            from gui_app.engine.ps_launch import run_parameter_servers

            status, step = run_parameter_servers(config, run_dir, events, control, args.command == "resume",
                                                 train=_train, one_line=_one_line)
        elif config.strategy.name in MULTI_WORKER:  # worker processes, launched and watched here
            from gui_app.engine.cluster_launch import run_cluster

            status, step = run_cluster(config, run_dir, events, control, resume=args.command == "resume")
        else:
            status, step = _train(config, run_dir, events, control, resume=args.command == "resume")
        events.emit("run_finished", status=status, run_dir=str(run_dir), step=step)
        return EXIT_OK
    except BaseException as exc:  # noqa: BLE001 - every failure becomes one line and an exit code
        if isinstance(exc, KeyboardInterrupt):
            kind, code, message = "internal", EXIT_FAILED, "interrupted"
        else:
            kind, code = _classify(exc)
            message = _one_line(exc)
            step = getattr(exc, "step", step)  # a failed cluster knows how far it got
        if args.debug or kind == "internal":
            # An internal error is our bug: keep its traceback on stderr for the report.
            traceback.print_exc(file=sys.stderr)
        print(f"replica-studio {args.command}: {message}", file=sys.stderr)
        events.emit("error", message=message, kind=kind)
        extra = {"resumable": True} if getattr(exc, "resumable", False) else {}
        events.emit("run_finished", status="failed", run_dir=str(run_dir) if run_dir else None, step=step,
                    message=message, **extra)
        return code
    finally:
        events.close()


def _train(config: RunConfig, run_dir: Path, events: EventWriter, control: Control, resume: bool,
           data_seed: int | None = None, wrap_control=None, controller_factory=None):
    from gui_app.engine import context
    from gui_app.engine.runner import RunController

    if resume:
        info = rundir.read_run(run_dir)
        if info.status == "completed":
            raise ConfigError(f"run_dir: {run_dir} has already completed; nothing to resume")
    progress = lambda p: events.emit("progress", **p)  # noqa: E731
    ctx = context.prepare(config, progress, data_seed=data_seed)
    if wrap_control is not None:  # multi-worker: every worker acts on the same agreed commands
        control = wrap_control(ctx, control)
    context.build_model_state(ctx, run_dir)
    restored = context.restore_latest(ctx) if resume else False
    if resume and not restored:
        ctx.warnings.append("no checkpoint found: the run starts again from step 0")
    from gui_app.core.training.models import describe

    start = int(ctx.step.numpy())
    model_info = describe(ctx.model)
    built, d = ctx.built, ctx.dataset
    events.emit(
        "run_started", run_dir=str(run_dir), config=config.to_dict(), resumed=resume, start_step=start,
        total_steps=ctx.total_steps, steps_per_epoch=ctx.steps_per_epoch, epochs=config.training.epochs,
        num_replicas=built.num_replicas,
        replicas=[{"replica": i, "worker": w, "device": dev}
                  for i, (w, dev) in enumerate(zip(built.replica_workers, built.devices))],
        num_workers=built.num_workers,
        global_batch_size=config.training.global_batch_size,
        per_replica_batch_size=config.training.global_batch_size // built.num_replicas,
        dataset={**d.summary(), "validation_examples": 0 if ctx.splits.x_val is None else len(ctx.splits.x_val),
                 "train_examples": len(ctx.splits.x_train)},
        model={"name": model_info["name"], "parameters": model_info["parameters"],
               "trainable_parameters": model_info["trainable_parameters"]},
        strategy={"name": config.strategy.name, "cross_device_ops": built.cross_device_ops},
        versions=context.versions(), data_seed=ctx.data_seed)
    for warning in ctx.warnings:
        events.emit("warning", message=warning)
    controller = (controller_factory or RunController)(ctx, run_dir, events, control)
    try:
        status = controller.train()
        if status == "completed":
            controller.save_model()
            controller.evaluate()
    finally:
        controller.close()
    return status, int(ctx.step.numpy())


def _evaluate(config: RunConfig, run_dir: Path, events: EventWriter) -> int:
    """Evaluate model.keras (or the newest checkpoint) on the run's test set."""
    from gui_app.engine import context
    from gui_app.engine.runner import RunController

    if config.strategy.name in MULTI_WORKER:  # re-evaluating a cluster's model needs no cluster
        config = config.replace(strategy={"name": "default", "workers": 0, "ps": 0, "cluster": None,
                                          "communication": "auto", "timeout_s": None, "max_restarts": 0})
    ctx = context.prepare(config, lambda p: events.emit("progress", **p))
    context.build_model_state(ctx, run_dir)
    model_file = run_dir / rundir.MODEL_FILE
    if model_file.exists():
        import keras

        ctx.model.set_weights(keras.saving.load_model(model_file, compile=False).get_weights())
    elif not context.restore_latest(ctx):
        raise InputError(f"run_dir: {run_dir} has neither {rundir.MODEL_FILE} nor a checkpoint to evaluate")
    controller = RunController(ctx, run_dir, events, Control())
    controller.evaluate()
    controller.close()
    # Re-evaluating does not change how the run ended, so run_finished goes to stdout only.
    events.emit("run_finished", status="completed", run_dir=str(run_dir), step=int(ctx.step.numpy()),
                durable=False)
    return EXIT_OK
