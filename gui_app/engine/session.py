"""One training session in this process: set up the data, strategy and model, restore the
newest checkpoint when resuming, announce the run (``run_started``), train it with the
controller, then save and evaluate the model. Used by ``train``/``resume`` and by every worker
of a cluster.
"""
from __future__ import annotations

from pathlib import Path

from gui_app.core import rundir
from gui_app.core.config import ConfigError, RunConfig
from gui_app.core.disk import require_free
from gui_app.engine.control import Control
from gui_app.engine.events import EventWriter


def train_session(config: RunConfig, run_dir: Path, events: EventWriter, control: Control, resume: bool,
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
