"""``replica-studio worker CONFIG``: one worker of a MultiWorkerMirroredStrategy cluster.

Started by the local launcher (``train`` with ``strategy.workers``), by hand on each other
host of a ``strategy.cluster`` list (``--index i``), by ``srun`` in a Slurm allocation, by
the Kubeflow training operator (TF_CONFIG), or as a pod of a Kubernetes Indexed Job
(``--cluster kubernetes``: schedulers/kubernetes/cluster.py). TensorFlow's rule for multi-worker checkpoints
(Keras's ``distributed_file_utils``): every worker saves, because saving may need a collective;
only the chief's directory is kept. So the chief writes the real run directory and the others
a temporary copy of one that they delete when they end.
"""
from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gui_app.core import rundir
from gui_app.core.batch_split import batch_split
from gui_app.core.config import ConfigError, RunConfig
from gui_app.core.events import Error, RunFinished
from gui_app.engine.cluster.topology import Task, load_config
from gui_app.engine.run.control import Control, reclaim_signals
from gui_app.engine.run.event_writer import EventWriter
from gui_app.engine.run.exits import EXIT_FAILED, EXIT_OK
from gui_app.engine.run.failures import JoinTimeout, classify, one_line
from gui_app.engine.schedulers.kubernetes import cluster as kubernetes

COMMANDS = ("worker",)
# A worker other than the chief waits this much longer than the join timeout: started by hand or by
# a scheduler, it may come up long before the chief. Its message says both numbers.
NON_CHIEF_GRACE_S = 60


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("worker", help="run one worker of a multi-worker cluster (on each other host)",
                              description="One worker of a multi_worker_mirrored run. On each other host of "
                                          "strategy.cluster run `replica-studio worker CONFIG --index I` with the "
                                          "same config file; index 0 (the chief) writes the run directory.")
    _add_arguments(p)
    p.set_defaults(handler=run)


def _add_arguments(p) -> None:
    p.add_argument("config", help="the run configuration (the same file on every host)")
    p.add_argument("--index", type=int, help="this host's position in strategy.cluster (0 is the chief)")
    p.add_argument("--run-dir", help="chief: the run directory to write (default: a new one in --runs-dir)")
    p.add_argument("--runs-dir", help="chief: folder for the new run directory (default: the user data folder)")
    p.add_argument("--resume", action="store_true", help="continue from the newest checkpoint")
    p.add_argument("--resume-or-start", dest="resume_or_start", action="store_true",
                   help="with --run-dir on a shared filesystem: resume that run if it has a checkpoint, else start "
                        "it (every worker; a scheduler's script that is submitted again or requeued)")
    # Its old name: "continue" is the control word that un-pauses a run. Scripts written before
    # (a job.sbatch submitted again, a kept job.yaml) still say --continue.
    p.add_argument("--continue", dest="resume_or_start", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--restore-from", help="a non-chief worker: copy this checkpoint folder (the chief's) first")
    p.add_argument("--data-seed", type=int, help="the data order seed every worker must share")
    p.add_argument("--cluster", choices=("slurm", "tf_config", "kubernetes"),
                   help="take the cluster from Slurm's variables, TF_CONFIG or a Kubernetes Indexed Job's pod "
                        "environment instead of the config's")
    p.add_argument("--allow-public-hosts", action="store_true",
                   help="allow cluster addresses that are not loopback or private (gRPC has no authentication)")
    p.add_argument("--events", choices=("jsonl", "text", "none"), default="text")
    p.add_argument("--control", choices=("stdin", "none"), default="none")
    p.add_argument("--debug", action="store_true")
    # The local launcher relays the chief's events into the run directory itself.
    p.add_argument("--no-events-file", action="store_true", help=argparse.SUPPRESS)
    # The launcher's stall watch: where this worker sends its status reports (status_reports.py).
    p.add_argument("--status-to", help=argparse.SUPPRESS)


def run(args) -> int:
    code, ended = _run(args)
    if ended is not None:  # the run ended normally here: leave the cluster with the others (leaving.py)
        from gui_app.engine.cluster.leaving import leave

        leave(ended, code)  # never returns
    return code


@dataclass
class _Worker:
    """What this worker holds while it runs: what its failure and its end must close or tell."""
    chief: bool = True
    events: EventWriter | None = None
    reporter: Any = None  # the status reporter to the stall watch (the launcher's, or a scheduler-run chief's)
    watch: Any = None  # a scheduler-run chief's stall watch (engine/cluster/chief_watch.py)
    run_dir: Path | None = None
    temp_dir: Path | None = None  # a non-chief's copy of the run directory, deleted at the end
    session: Any = None  # the TrainingSession, once it exists


def _run(args) -> tuple[int, Task | None]:
    """(exit code, this worker's task when its run ended normally and it is to leave the cluster)."""
    from gui_app.engine.cluster import chief_watch
    from gui_app.engine.cluster.agreement import ClusterControl
    from gui_app.engine.cluster.status_reports import StepSeen, reporter_from
    from gui_app.engine.cluster.topology import resolve_task
    from gui_app.engine.training.session import TrainingSession

    w = _Worker()
    try:
        cluster = args.cluster
        if cluster == "kubernetes":  # the pod's TF_CONFIG, built from the manifest's environment
            os.environ["TF_CONFIG"] = kubernetes.tf_config(os.environ)
            cluster = "tf_config"
        config = load_config(args.config, args.allow_public_hosts, cluster)
        if config.strategy.name == "parameter_server":
            return _serve(config, args), None
        if config.strategy.name != "multi_worker_mirrored":
            raise ConfigError(f"strategy.name: the worker command runs multi_worker_mirrored, not "
                              f"{config.strategy.name!r}")
        task = resolve_task(config.strategy, args.index)
        w.chief = task.is_chief
        w.reporter = reporter_from(getattr(args, "status_to", None), task.index)
        # A cluster a scheduler runs has no launcher: its chief hosts the stall watch.
        scheduled = (config.strategy.cluster in ("slurm", "tf_config") and w.reporter is None
                     and chief_watch.wanted(task))
        if scheduled and not w.chief:
            w.reporter = chief_watch.reporter_to_chief(task, config.to_json())
        mode = args.events if w.chief else "none"
        w.events = events = chief_watch.WatchedEvents(mode) if scheduled and w.chief else EventWriter(mode)
        if task.tf_config:
            os.environ["TF_CONFIG"] = task.tf_config
        start = _resume_point(args)
        if start is None:
            return EXIT_OK, None
        resume, restore_from = start
        run_dir = _open_run_dir(args, config, task, w, resume, restore_from)
        if not args.no_events_file:
            events.attach(run_dir)
        control = Control.listening(args.control == "stdin")
        if isinstance(events, chief_watch.WatchedEvents):
            w.watch = _chief_watch(task, config, events, control)
            w.reporter = w.watch.reporter if w.watch else None
        built = _form_cluster(task, config, events)
        # The one split rule (core/batch_split.py), the same answer as train, submit and the form,
        # asked here so a split the cluster cannot run ends it before the session starts (the
        # session's prepare asks again and reports a warning).
        split = batch_split(config.strategy.name, config.training.global_batch_size, built.num_replicas,
                            built.num_workers, config.training.accumulation_steps)
        if split.error:
            raise ConfigError(split.error)
        # Every worker acts on the same agreed stop, pause and checkpoint (engine/cluster/agreement.py).
        agreed = ClusterControl(control, built.strategy)
        w.session = session = TrainingSession(config, run_dir, events, agreed, resume, data_seed=args.data_seed)
        status, step = session.run([StepSeen(w.reporter)] if w.reporter else [])
        assert session.state is not None  # run() built it
        # On stderr, so that anyone (the tests) can check that the replicas ended equal.
        print(f"weights sha256 {_digest(session.state.model)} at step {step}", file=sys.stderr, flush=True)
        events.emit(RunFinished(status=status, run_dir=str(run_dir), step=step,
                                message=agreed.stop_reason if status == "stopped" else None))
        if status == "stopped" and args.cluster == "kubernetes":
            return kubernetes.EXIT_STOPPED, task  # the Job starts the pod again, which continues the run
        return EXIT_OK, task
    except BaseException as exc:  # noqa: BLE001 - one line and an exit code, like the engine
        return _failed(args, exc, w), None
    finally:
        if w.watch is not None:
            w.watch.close()
        if w.reporter is not None:
            w.reporter.close()
        if w.events is not None:
            w.events.close()
        if w.temp_dir is not None:
            shutil.rmtree(w.temp_dir, ignore_errors=True)


def _chief_watch(task: Task, config: RunConfig, events, control: Control):
    """The scheduler-run chief's stall watch, or None (and why, on stderr) when its board's port is taken."""
    from gui_app.engine.cluster.chief_watch import ChiefWatch

    try:
        return ChiefWatch(task, config.to_json(), events, lambda: control.paused or control.stop_requested)
    except OSError as exc:
        print(f"[replica-studio] {task.name}: no stall watch (the status board's UDP port: {exc.strerror or exc})",
              file=sys.stderr, flush=True)
        return None


def _resume_point(args) -> tuple[bool, str | None] | None:
    """(resume, the checkpoint folder a non-chief copies); None when ``--resume-or-start`` finds
    the run completed: nothing to do, on every worker alike."""
    if not (args.resume_or_start and args.run_dir):
        return args.resume, args.restore_from
    if rundir.is_run_dir(args.run_dir) and rundir.read_run(args.run_dir).status == "completed":
        # A completed run's script submitted again, or requeued by a signal that came too late:
        # every worker reads the same file and ends before the cluster forms.
        print(f"replica-studio worker: {args.run_dir} has completed; nothing to continue", file=sys.stderr)
        return None
    return rundir.has_checkpoint(args.run_dir), str(Path(args.run_dir) / rundir.CHECKPOINT_DIR)


def _open_run_dir(args, config: RunConfig, task: Task, w: _Worker, resume: bool, restore_from: str | None) -> Path:
    """The chief's run directory (the one named, or a new one), or a non-chief's temporary copy
    (``w.temp_dir``, set before anything is written into it, so the end deletes it)."""
    if w.chief and args.run_dir:
        w.run_dir = run_dir = Path(args.run_dir)  # named in the failure's run_finished even if it cannot be made
        if not rundir.is_run_dir(run_dir):  # a script's first start: the run directory it names
            run_dir.mkdir(parents=True, exist_ok=True)
            config.save(run_dir / rundir.CONFIG_FILE)
    elif w.chief:
        run_dir = rundir.create_run_dir(Path(args.runs_dir) if args.runs_dir else rundir.default_runs_dir(), config)
    else:
        w.temp_dir = Path(tempfile.mkdtemp(prefix=f"replica-studio-{task.type}{task.index}-"))
        run_dir = w.temp_dir / "run"
        run_dir.mkdir()
        config.save(run_dir / rundir.CONFIG_FILE)
        if resume and restore_from and Path(restore_from).is_dir():
            shutil.copytree(restore_from, run_dir / rundir.CHECKPOINT_DIR)
    w.run_dir = run_dir
    return run_dir


def _form_cluster(task: Task, config: RunConfig, events: EventWriter):
    """Wait for the peers (the chief), then form TensorFlow's cluster under the join alarm and
    check every worker runs this run: the built strategy."""
    from gui_app.engine.cluster.run_identity import check_same_run, run_identity
    from gui_app.engine.cluster.topology import arm_join_alarm, wait_for_peers

    chief, join = task.is_chief, config.strategy.join_timeout_s
    waited = wait_for_peers(task, join, events.progress) if chief else 0.0
    limit = join if chief else join + NON_CHIEF_GRACE_S
    grace = "" if chief else f" plus {NON_CHIEF_GRACE_S} s, as a worker may start before the chief"
    print(f"[replica-studio] {task.name}: forming the cluster; this process ends if that takes more than "
          f"{limit:g} s (the join timeout, {join:g} s{grace})", file=sys.stderr, flush=True)
    arm_join_alarm(limit)
    started = time.monotonic()
    built = _build_first(config)
    reclaim_signals()  # the coordination service replaced our SIGTERM handler
    check_same_run(built.strategy, run_identity(task.cluster, config.to_json()), built.replica_workers)
    if hasattr(signal, "alarm"):
        signal.alarm(0)
    if chief and task.peers():  # news, not a warning: a log line like the one above
        print(f"[replica-studio] {task.name}: cluster of {built.num_workers} workers joined in "
              f"{waited + time.monotonic() - started:.1f} s", file=sys.stderr, flush=True)
    return built


def _failed(args, exc: BaseException, w: _Worker) -> int:
    """A failure as one line on stderr, the chief's ``error`` and ``run_finished`` events, and
    an exit code."""
    if isinstance(exc, KeyboardInterrupt):
        kind, code, message = "internal", EXIT_FAILED, "interrupted"
    else:
        kind, code = classify(exc)
        message = f"cluster: {exc}" if isinstance(exc, JoinTimeout) else one_line(exc)
        if w.watch is not None:  # TensorFlow's heartbeat failure after a stall: what the stall saw
            message += w.watch.context()
    if args.debug or kind == "internal":
        traceback.print_exc(file=sys.stderr)
    print(f"replica-studio worker: {message}", file=sys.stderr, flush=True)
    if w.events is not None:
        w.events.emit(Error(message=message, kind=kind))
        w.events.emit(RunFinished(status="failed", run_dir=str(w.run_dir) if w.chief and w.run_dir else None,
                                  step=w.session.step_reached() if w.session else 0, message=message))
    return code


def _build_first(config: RunConfig):
    """Logical devices, then the strategy, before any other TensorFlow op."""
    from gui_app.engine.training import devices, strategies

    devices.configure_runtime(config.runtime)
    return strategies.build_strategy(config.strategy)


def _digest(model) -> str:
    import hashlib

    h = hashlib.sha256()
    for w in model.get_weights():
        h.update(w.tobytes())
    return h.hexdigest()[:16]


def _serve(config: RunConfig, args) -> int:
    """A parameter-server cluster's worker or ps task: a gRPC server the coordinator drives.
    ``server.join()`` never returns; whoever started it ends it."""
    from gui_app.engine.cluster.topology import resolve_task

    task = resolve_task(config.strategy, args.index)
    if task.tf_config:
        os.environ["TF_CONFIG"] = task.tf_config
    import tensorflow as tf

    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    server = tf.distribute.Server(resolver.cluster_spec(), job_name=resolver.task_type,
                                  task_index=resolver.task_id, protocol=resolver.rpc_layer or "grpc", start=True)
    print(f"{resolver.task_type} {resolver.task_id} serving at {server.target}", file=sys.stderr, flush=True)
    server.join()
    return EXIT_OK
