"""``train``, ``resume`` and ``evaluate``: one engine process, one run directory.

Every path out of here ends with a ``run_finished`` event and an exit code; errors become one
line (an ``error`` event and stderr), never a traceback unless ``--debug``.
"""
from __future__ import annotations

import shutil
import sys
import traceback
from pathlib import Path

from gui_app.core import atomic_io, rundir
from gui_app.core.config import MULTI_WORKER, ConfigError, RunConfig
from gui_app.core.disk import DiskError, disk_full_message, is_disk_full, require_free, require_writable
from gui_app.core.overrides import apply_overrides
from gui_app.core.run_lock import RunInUse, RunLock
from gui_app.engine.exits import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK
from gui_app.engine.cluster import load_config
from gui_app.engine.context import InputError
from gui_app.engine.control import WINDOW_GONE, Control
from gui_app.engine.events import EventWriter


def _one_line(exc: BaseException, run_dir: Path | None = None, hints: dict | None = None) -> str:
    if is_disk_full(exc):
        return disk_full_message(run_dir)  # before the OOM wording: TF reports ENOSPC as ResourceExhausted
    text = str(exc).strip()
    if type(exc).__module__.startswith("tensorflow"):
        # TensorFlow errors carry the op and a graph trace after the first line.
        name = type(exc).__name__
        text = f"{name}: {text.splitlines()[0] if text else ''}"
        if name == "ResourceExhaustedError":
            text = _out_of_memory(text, run_dir, hints or {})
    return text.splitlines()[0] if text else type(exc).__name__


def _out_of_memory(text: str, run_dir: Path | None, hints: dict) -> str:
    per_replica, replicas = hints.get("per_replica_batch"), hints.get("replicas")
    if not per_replica:
        return "out of memory: " + text + " (try a smaller training.global_batch_size)"
    smaller = max(replicas or 1, (per_replica // 2) * (replicas or 1))
    how = f"; resume with --set training.global_batch_size={smaller}" if run_dir else ""
    return (f"out of memory with {per_replica} examples per replica: {text} (try a smaller "
            f"training.global_batch_size, e.g. {smaller}{how}; the last checkpoint is kept)")


def _classify(exc: BaseException) -> tuple[str, int]:
    from gui_app.engine.runner import TrainingDiverged

    if isinstance(exc, ConfigError):
        return "config", EXIT_BAD_INPUT
    if getattr(exc, "event_kind", None):  # e.g. a failed cluster (engine/cluster_launch.py)
        return exc.event_kind, exc.exit_code
    if isinstance(exc, (InputError, RunInUse, DiskError)):
        return "input", EXIT_BAD_INPUT
    if is_disk_full(exc):
        return "disk", EXIT_FAILED
    if isinstance(exc, TrainingDiverged) or type(exc).__module__.startswith("tensorflow"):
        return "training", EXIT_FAILED
    return "internal", EXIT_FAILED


def _say(text: str) -> None:
    """One line on stderr, which may be gone with the window: never raises."""
    try:
        print(text, file=sys.stderr, flush=True)
    except Exception:  # noqa: BLE001
        pass


def _step_reached(hints: dict) -> int:
    try:
        return int(hints["step_var"].numpy()) if "step_var" in hints else 0
    except Exception:  # noqa: BLE001 - the error path must not raise
        return 0


def run_command(args, control: Control | None = None, stream=None) -> int:
    """Run one engine command; ``control`` and ``stream`` let tests drive it in-process."""
    events = EventWriter(args.events, stream)
    if control is None:
        control = Control()
        control.install_signal_handlers()
        if args.control == "stdin":
            control.read_stream(sys.stdin)
    events.on_stdout_lost = lambda: control.command("stop", WINDOW_GONE)
    run_dir: Path | None = None
    lock: RunLock | None = None
    created = False  # run_dir is new, made by this process
    hints: dict = {}
    try:
        if args.command == "train":
            config = load_config(args.config, getattr(args, "allow_public_hosts", False))
            runs_dir = Path(args.runs_dir) if args.runs_dir else rundir.default_runs_dir()
            require_writable(runs_dir)
            try:
                run_dir = rundir.create_run_dir(runs_dir, config)
                created = True
            except OSError as exc:
                if is_disk_full(exc):
                    raise DiskError(disk_full_message(runs_dir)) from None
                raise ConfigError(f"--runs-dir: cannot create a run directory in {runs_dir}: "
                                  f"{exc.strerror or exc}") from None
        else:
            run_dir = Path(args.run_dir)
            if not (run_dir / rundir.CONFIG_FILE).is_file():
                raise ConfigError(f"run_dir: {run_dir} is not a run directory (no {rundir.CONFIG_FILE})")
            config = RunConfig.load(run_dir / rundir.CONFIG_FILE)
        lock = RunLock(run_dir).acquire()
        if getattr(args, "set", None):
            config = apply_overrides(config, args.set)
        events.attach(run_dir)
        if args.command == "evaluate":
            return _evaluate(config, run_dir, events)
        if getattr(args, "set", None):
            atomic_io.write_text(run_dir / rundir.CONFIG_FILE, config.to_json() + "\n")
        resume = args.command == "resume"
        if config.strategy.name == "parameter_server":  # this process coordinates the servers it starts
            from gui_app.engine.ps_launch import run_parameter_servers

            status, step = run_parameter_servers(config, run_dir, events, control, resume,
                                                 train=_train, one_line=_one_line)
        elif config.strategy.name in MULTI_WORKER:  # worker processes, launched and watched here
            from gui_app.engine.cluster_launch import run_cluster

            status, step = run_cluster(config, run_dir, events, control, resume=resume)
        else:
            status, step = _train(config, run_dir, events, control, resume=resume, hints=hints)
        finished = {"message": control.stop_reason} if status == "stopped" and control.stop_reason else {}
        events.emit("run_finished", status=status, run_dir=str(run_dir), step=step, **finished)
        events.sync()
        return EXIT_OK
    except BaseException as exc:  # noqa: BLE001 - every failure becomes one line and an exit code
        if isinstance(exc, KeyboardInterrupt):
            kind, code, message = "internal", EXIT_FAILED, "interrupted"
        else:
            try:
                kind, code = _classify(exc)
                message = _one_line(exc, run_dir, hints)
            except Exception:  # noqa: BLE001 - the error path must not raise
                kind, code, message = "internal", EXIT_FAILED, type(exc).__name__
        if args.debug or kind == "internal":
            # An internal error is our bug: keep its traceback on stderr for the report.
            try:
                traceback.print_exc(file=sys.stderr)
            except Exception:  # noqa: BLE001
                pass
        _say(f"replica-studio {args.command}: {message}")
        # Only a run that trained in this process (or a new one) gets the failure in its history:
        # a refused resume or a failed re-evaluation leaves the run as it was (completed stays completed).
        touch_run = lock is not None and (args.command == "train" or hints.get("started", False))
        events.emit_final("error", message=message, kind=kind, durable=touch_run)
        extra = {"resumable": True} if getattr(exc, "resumable", False) else {}  # a failed cluster
        events.emit_final("run_finished", status="failed", run_dir=str(run_dir) if run_dir else None,
                          step=getattr(exc, "step", None) or _step_reached(hints), message=message,
                          durable=touch_run, **extra)
        if created and code == EXIT_BAD_INPUT and not rundir.has_checkpoint(run_dir):
            # Refused before it trained (bad dataset, disk too small): leave nothing half-made behind.
            events.close()
            shutil.rmtree(run_dir, ignore_errors=True)
        return code
    finally:
        events.close()
        if lock is not None:
            lock.release()


def _train(config: RunConfig, run_dir: Path, events: EventWriter, control: Control, resume: bool,
           hints: dict | None = None, data_seed: int | None = None, wrap_control=None, controller_factory=None):
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
    if hints is not None:  # what the error path needs to name an OOM and the step reached
        hints.update(per_replica_batch=config.training.global_batch_size // ctx.built.num_replicas,
                     replicas=ctx.built.num_replicas, step_var=ctx.step)
    require_free(run_dir, context.state_bytes(ctx), "one checkpoint and the saved model")
    restored = context.restore_latest(ctx, ctx.warnings) if resume else False
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
        strategy={"name": config.strategy.name, "cross_device_ops": built.cross_device_ops,
                  **getattr(built, "communication", {})},
        versions=context.versions(), data_seed=ctx.data_seed)
    if hints is not None:
        hints["started"] = True
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
    warnings: list[str] = []
    if model_file.exists():
        import keras

        try:
            ctx.model.set_weights(keras.saving.load_model(model_file, compile=False).get_weights())
        except Exception as exc:  # noqa: BLE001 - Keras raises many types for a damaged or foreign file
            raise InputError(f"{model_file}: cannot load it ({type(exc).__name__}: "
                             f"{str(exc).strip().splitlines()[0] if str(exc).strip() else 'damaged'})") from None
    elif not context.restore_latest(ctx, warnings):
        raise InputError(f"run_dir: {run_dir} has neither {rundir.MODEL_FILE} nor a checkpoint to evaluate")
    for warning in warnings:
        events.emit("warning", message=warning, durable=False)
    controller = RunController(ctx, run_dir, events, Control())
    controller.evaluate()
    controller.close()
    # Re-evaluating does not change how the run ended, so run_finished goes to stdout only.
    events.emit("run_finished", status="completed", run_dir=str(run_dir), step=int(ctx.step.numpy()),
                durable=False)
    return EXIT_OK
