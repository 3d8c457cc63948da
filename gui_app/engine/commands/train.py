"""``train``, ``resume`` and ``evaluate``: one engine process, one run directory.

Every path out of here ends with a ``run_finished`` event and an exit code; errors become one
line (an ``error`` event and stderr), never a traceback unless ``--debug``.
"""
from __future__ import annotations

import argparse
import shutil
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from gui_app.core import atomic_io, rundir
from gui_app.core.config import MULTI_WORKER, ConfigError, RunConfig
from gui_app.core.disk import DiskError, disk_full_message, is_disk_full, require_writable
from gui_app.core.events import Error, RunFinished, Warning
from gui_app.core.file_kinds import keras_file_problem
from gui_app.core.messages import typed_line
from gui_app.core.overrides import apply_overrides, set_keys
from gui_app.core.run_lock import RunLock
from gui_app.engine.cluster.topology import load_config
from gui_app.engine.commands.reporting import empty_option
from gui_app.engine.run.control import WINDOW_GONE, Control
from gui_app.engine.run.event_writer import EventWriter
from gui_app.engine.run.exits import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK, RUN_COMMANDS
from gui_app.engine.run.failures import ClusterFailed, InputError, classify, one_line
from gui_app.engine.run.presence import RunPresence

if TYPE_CHECKING:
    from gui_app.engine.training.session import TrainingSession

COMMANDS = RUN_COMMANDS


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    def run_options(p: argparse.ArgumentParser) -> None:
        p.add_argument("--events", choices=("jsonl", "text", "none"), default="text",
                       help="stdout format: JSON lines (only events on stdout), readable text, or nothing")
        p.add_argument("--control", choices=("stdin", "none"), default="none",
                       help="read stop/pause/continue/checkpoint lines from stdin (used by the desktop app)")
        p.add_argument("--debug", action="store_true", help="print tracebacks")
        p.set_defaults(handler=run_command)

    def detach_option(p: argparse.ArgumentParser) -> None:
        p.add_argument("--detach", action="store_true",
                       help="run in a session of its own (it outlives this terminal and a logout): print the run "
                            "directory once it has started and exit; follow it with 'attach RUN_DIR'")

    def pause_option(p: argparse.ArgumentParser) -> None:
        p.add_argument("--pause-after-each-epoch", action="store_true",
                       help="pause after every epoch's validation until 'continue' (or 'stop') arrives on the "
                            "run's control channel: a sweep decides on pruning before the next epoch starts")

    p = subparsers.add_parser("train", help="train a model from a run configuration (JSON)")
    p.add_argument("config", help="run configuration file (JSON)")
    p.add_argument("--allow-public-hosts", action="store_true",
                   help="allow strategy.cluster hosts that are not loopback or private (gRPC has no authentication)")
    p.add_argument("--runs-dir", help="folder for run directories (default: the user data folder)")
    run_options(p)
    detach_option(p)
    pause_option(p)
    p = subparsers.add_parser("resume", help="continue a stopped, failed or killed run from its last checkpoint")
    p.add_argument("run_dir", metavar="RUN_DIR|BUNDLE",
                   help="a run folder, or a run bundle with its checkpoints (replica-studio bundle "
                        "--with-checkpoints): extracted into a new run directory of the runs folder, resumed there")
    p.add_argument("--runs-dir", help="where a bundle's new run directory goes (default: the user data folder)")
    p.add_argument("--set", action="append", metavar="KEY=VALUE",
                   help="change a training setting that keeps the model, e.g. training.learning_rate=0.0005 "
                        "or training.global_batch_size=32 (repeatable)")
    run_options(p)
    detach_option(p)
    pause_option(p)
    p = subparsers.add_parser("evaluate", help="evaluate a run's model on its test set again")
    p.add_argument("run_dir", metavar="RUN_DIR|BUNDLE",
                   help="a run folder (the evaluation is written into it), or a run bundle with its model "
                        "(replica-studio bundle --with-model): extracted into a new folder, evaluated there")
    p.add_argument("-o", "--output", metavar="FOLDER",
                   help="a bundle's evaluation: the new folder to write (default: BUNDLE-evaluation beside it)")
    p.add_argument("--dataset-path", metavar="PATH",
                   help="the dataset's files on this computer when they are not where the run read them "
                        "(dataset.path; a tfds dataset's data_dir)")
    run_options(p)


def _say(text: str) -> None:
    """One line on stderr, which may be gone with the window: never raises."""
    try:
        print(text, file=sys.stderr, flush=True)
    except Exception:  # noqa: BLE001 - a closed or broken stderr: nobody is left to tell
        pass


@dataclass
class _Run:
    """What this command holds while it runs: what its failure and its end must close or undo."""
    extracted: Path | None = None  # a bundle's run, extracted for this command
    run_dir: Path | None = None
    created: Path | None = None  # run_dir, when this process made it
    lock: RunLock | None = None
    presence: RunPresence | None = None
    session: TrainingSession | None = None  # a run trained in this process (not a cluster's launcher)


def run_command(args, control: Control | None = None, stream=None) -> int:
    """Run one engine command; ``control`` and ``stream`` let tests drive it in-process. With
    ``args.detach`` this process is the detached run (engine/run/detach.py): it stops only when asked."""
    events = EventWriter(args.events, stream)
    detached = getattr(args, "detach", False)
    if control is None:
        control = Control.listening(args.control == "stdin")
    if not detached:  # the process that started it reads its output: it stops when that one goes away
        events.on_stdout_lost = lambda: control.command("stop", WINDOW_GONE)
    run = _Run(extracted=getattr(args, "extracted", None))
    try:
        config = _new_run(args, run) if args.command == "train" else _existing_run(args, run)
        run_dir = run.run_dir
        assert run_dir is not None  # both set it
        run.lock = RunLock(run_dir).acquire()
        if args.command != "evaluate":
            run.presence = RunPresence(run_dir, args.command, detached, args.debug).open(control)
        if getattr(args, "set", None):
            config = apply_overrides(config, args.set)
        events.attach(run_dir)
        for warning in run.presence.warnings if run.presence else ():
            events.emit(Warning(message=warning))
        if args.command == "evaluate":
            return _evaluate(config, run_dir, events)
        if getattr(args, "set", None):
            atomic_io.write_text(run_dir / rundir.CONFIG_FILE, config.to_json() + "\n")
        return _train(args, config, run, events, control)
    except BaseException as exc:  # noqa: BLE001 - every failure becomes one line and an exit code
        return _failed(args, exc, run, events)
    finally:
        if run.presence is not None:
            run.presence.close()
        events.close()
        if run.lock is not None:
            run.lock.release()


def _new_run(args, run: _Run) -> RunConfig:
    """``train``: the config checked, then a new run directory in the runs folder."""
    if empty := empty_option(args):  # a script's unset variable: not the default folder, quietly
        raise ConfigError(empty)
    config = load_config(args.config, args.allow_public_hosts)
    runs_dir = Path(args.runs_dir) if args.runs_dir else rundir.default_runs_dir()
    require_writable(runs_dir)
    _check_cluster(config, runs_dir)
    try:
        run.run_dir = run.created = rundir.create_run_dir(runs_dir, config)
    except OSError as exc:
        if is_disk_full(exc):
            raise DiskError(disk_full_message(runs_dir)) from None
        raise ConfigError(f"--runs-dir: cannot create a run directory in {runs_dir}: "
                          f"{exc.strerror or exc}") from None
    return config


def _existing_run(args, run: _Run) -> RunConfig:
    """``resume`` and ``evaluate``: the run directory named, and its config."""
    run.run_dir = run_dir = Path(args.run_dir)
    if not (run_dir / rundir.CONFIG_FILE).is_file():
        raise ConfigError(f"run_dir: {run_dir} is not a run directory (no {rundir.CONFIG_FILE})")
    _bundle_only_options(args, run.extracted)
    config = RunConfig.load(run_dir / rundir.CONFIG_FILE)
    if getattr(args, "dataset_path", None):
        config = with_dataset_path(config, args.dataset_path)
    return config


def _train(args, config: RunConfig, run: _Run, events: EventWriter, control: Control) -> int:
    """``train`` and ``resume``: the run in this process, or the cluster it starts, to its end."""
    run_dir = run.run_dir
    assert run_dir is not None
    resume = args.command == "resume"
    pause = getattr(args, "pause_after_each_epoch", False)
    if pause and config.strategy.name in (*MULTI_WORKER, "parameter_server"):
        raise ConfigError(f"--pause-after-each-epoch: works for one process's strategies, not "
                          f"{config.strategy.name!r}")
    if config.strategy.name == "parameter_server":  # this process coordinates the servers it starts
        from gui_app.engine.cluster.parameter_servers import run_parameter_servers

        run.session = new_session(config, run_dir, events, control, resume)
        status, step = run_parameter_servers(run.session)
    elif config.strategy.name in MULTI_WORKER:  # worker processes, launched and watched here
        from gui_app.engine.cluster.launcher import run_cluster

        status, step = run_cluster(config, run_dir, events, control, resume=resume)
    else:
        from gui_app.engine.training.actions.epoch_hold import EpochHold

        run.session = new_session(config, run_dir, events, control, resume)
        status, step = run.session.run([EpochHold(control)] if pause else [])
    message = control.stop_reason if status == "stopped" else None
    events.emit(RunFinished(status=status, run_dir=str(run_dir), step=step, message=message))
    events.sync()
    return EXIT_OK


def new_session(config: RunConfig, run_dir: Path, events: EventWriter, control: Control,
                resume: bool) -> TrainingSession:
    """The session that trains the run in this process. Imported here, not with the command line:
    the commands that do not train (``runs``, ``stop``, ``attach``) need none of the training
    modules. The UI tests' fake engine (tests/ui/fake_engine.py) puts its own in its place."""
    from gui_app.engine.training.session import TrainingSession

    return TrainingSession(config, run_dir, events, control, resume)


def _failed(args, exc: BaseException, run: _Run, events: EventWriter) -> int:
    """A failure as one line on stderr, an ``error`` and a ``run_finished`` event, and an exit
    code; a run refused before it trained leaves nothing half-made behind."""
    session = run.session
    if isinstance(exc, KeyboardInterrupt):
        kind, code, message = "internal", EXIT_FAILED, "interrupted"
    else:
        try:
            kind, code = classify(exc)
            message = one_line(exc, run.run_dir, session.batch if session else None)
        except Exception:  # noqa: BLE001 - the error path must not raise
            kind, code, message = "internal", EXIT_FAILED, type(exc).__name__
    if args.debug or kind == "internal":
        # An internal error is our bug: keep its traceback on stderr for the report.
        try:
            traceback.print_exc(file=sys.stderr)
        except Exception:  # noqa: BLE001 - a closed or broken stderr: nobody is left to tell
            pass
    _say(f"replica-studio {args.command}: {message}")
    # Only a run that trained in this process (or a new one) gets the failure in its history:
    # a refused resume or a failed re-evaluation leaves the run as it was (completed stays completed).
    touch_run = run.lock is not None and (args.command == "train" or (session is not None and session.started))
    events.emit_final(Error(message=message, kind=kind), durable=touch_run)
    cluster = exc if isinstance(exc, ClusterFailed) else None
    step = (cluster.step if cluster else 0) or (session.step_reached() if session else 0)
    events.emit_final(RunFinished(status="failed", run_dir=str(run.run_dir) if run.run_dir else None, step=step,
                                  message=message, resumable=bool(cluster and cluster.resumable)),
                      durable=touch_run)
    if run.created is not None and code == EXIT_BAD_INPUT and not rundir.has_checkpoint(run.created):
        # Refused before it trained (bad dataset, disk too small): leave nothing half-made behind.
        events.close()
        shutil.rmtree(run.created, ignore_errors=True)
    elif run.extracted is not None and (args.command == "evaluate" or not (session and session.started)):
        # A bundle's failed evaluation, or its resume refused before it trained: no folder left behind.
        events.close()
        shutil.rmtree(run.extracted, ignore_errors=True)
    return code


def _bundle_only_options(args, extracted: Path | None) -> None:
    """A run folder is evaluated and resumed where it is: the options that place a bundle's copy
    mean nothing for it, and are refused rather than quietly ignored."""
    if extracted is not None:
        return
    if getattr(args, "output", None):
        raise ConfigError("-o: only a bundle's evaluation goes to a folder of its own (a run folder's is written "
                          "into it)")
    if args.command == "resume" and getattr(args, "runs_dir", None):
        raise ConfigError("--runs-dir: only a bundle is resumed in a new run directory (a run folder resumes "
                          "where it is)")


def with_dataset_path(config: RunConfig, path: str) -> RunConfig:
    """``evaluate --dataset-path``: the run's dataset, read from where this computer has it."""
    if config.dataset.name == "digits":
        raise ConfigError("--dataset-path: the digits dataset is bundled with the app; it takes no path")
    key = "dataset.data_dir" if config.dataset.name == "tfds" else "dataset.path"
    return set_keys(config, {key: str(Path(path).expanduser())})


def _check_cluster(config: RunConfig, runs_dir: Path) -> None:
    """The cheap checks of ``preflight`` (engine/commands/preflight.py), before the run
    directory exists: a port taken, an address that does not answer, a dataset path missing here,
    too little space -- refused now rather than after the cluster's start-up."""
    cluster = config.strategy.cluster
    if config.strategy.name not in MULTI_WORKER or isinstance(cluster, str):  # a scheduler's: checked there
        return
    from gui_app.engine.commands.preflight import cheap_problems

    found = cheap_problems(config, runs_dir)
    if found:
        raise InputError("; ".join(found) + " (replica-studio preflight CONFIG checks every worker)")


def _evaluate(config: RunConfig, run_dir: Path, events: EventWriter) -> int:
    """Evaluate model.keras (or the newest checkpoint) on the run's test set."""
    from gui_app.engine.training import context
    from gui_app.engine.training.final_evaluation import evaluate_test_set
    from gui_app.engine.training.steps import evaluator

    ctx = context.prepare(context.single_process(config), events.progress, run_dir / context.DATA_DIR)
    state = context.build_model_state(ctx, run_dir)
    model_file = run_dir / rundir.MODEL_FILE
    warnings: list[str] = []
    if model_file.exists():
        import keras

        problem = keras_file_problem(model_file)
        if problem:
            raise InputError(problem)
        try:
            state.model.set_weights(keras.saving.load_model(model_file, compile=False).get_weights())
        except Exception as exc:  # noqa: BLE001 - Keras raises many types for a damaged or foreign file
            raise InputError(f"{model_file}: cannot load it ({typed_line(exc)})") from None
    elif not context.restore_latest(ctx, state, warnings):
        raise InputError(f"run_dir: {run_dir} has neither {rundir.MODEL_FILE} nor a checkpoint to evaluate")
    for warning in warnings:
        events.emit(Warning(message=warning), durable=False)
    evaluate_test_set(evaluator(ctx, state), ctx.input, run_dir, events)
    # Re-evaluating does not change how the run ended, so run_finished goes to stdout only. A model
    # loaded from model.keras has no optimizer state (steps_done() is 0): the run's record has its step.
    step = state.steps_done() or rundir.summarize_events(run_dir).step
    events.emit(RunFinished(status="completed", run_dir=str(run_dir), step=step), durable=False)
    return EXIT_OK
