"""``replica-studio rehearse CONFIG --at STEP``: prove that a run interrupted at a step and
resumed is the run that was never interrupted (docs/detached.md, "Rehearse a preemption").

    replica-studio rehearse run.json --at 30                       # SIGKILL to the run at step 30
    replica-studio rehearse run.json --at 30 --signal TERM --json  # a polite preemption
    replica-studio rehearse cluster.json --at 30 --worker 1        # worker 1, here or on its SSH host

It trains the config twice as separate engine processes, as the window and a terminal run
them, with ``training.batch_fingerprints`` on (each step event names the batch each replica
trained on): once interrupted -- the signal sent to the run's process, or to worker K of a
cluster that ``train`` starts (a local one, or one with workers on SSH hosts: signalled there
with ``kill`` over ssh, by the process id the run's ``workers.json`` records), as soon as it has
told step STEP -- and resumed with ``replica-studio resume`` unless
the cluster restarted itself (``strategy.max_restarts``); then once straight through, the
reference. gui_app/core/rehearsal.py compares them step for step and their final checkpoints.
Exit 0 equivalent, 1 not (or a run failed, or the combination cannot be certified), 2 bad input.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Iterator

import numpy as np

from gui_app.core import rundir
from gui_app.core.answers import Certificate, encode
from gui_app.core.config import MULTI_WORKER, ConfigError, RunConfig
from gui_app.core.events import RunStarted
from gui_app.core.live_runs import WorkerProcessRecord, read_workers
from gui_app.core.rehearsal import (
    cannot_certify,
    certify,
    compare_state,
    compare_steps,
    sentences,
    step_history,
    tolerance_for,
)
from gui_app.core.ssh import HostError, run_shell
from gui_app.core.ssh_hosts import HostsFileError, find_host
from gui_app.engine.run.exits import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK
from gui_app.identity import app_command, app_env

COMMANDS = ("rehearse",)
SIGNALS = {"TERM": signal.SIGTERM, "KILL": signal.SIGKILL}
RECORD_WAIT_S = 30.0  # a worker reports its process twice a second from its start: long recorded by then


class BadInput(Exception):
    """Exit 2 with this line."""


class RunFailed(Exception):
    """One of the rehearsal's runs did not end as it should: exit 1 with this line."""


class Interrupted(Exception):
    """SIGTERM or SIGINT to the rehearsal (the window's Cancel, Ctrl+C): its run is stopped first."""


def _interrupt(signum: int, frame: object) -> None:
    raise Interrupted(signal.Signals(signum).name)


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("rehearse", help="train a config straight through and interrupted at a step then "
                                               "resumed; certify that both are the same run")
    p.add_argument("config", help="run configuration file (JSON)")
    p.add_argument("--at", type=int, required=True, metavar="STEP", help="interrupt once the run has told this step")
    p.add_argument("--signal", choices=tuple(SIGNALS), default="KILL",
                   help="KILL (the default: work since the last checkpoint is lost) or TERM (stops with a checkpoint)")
    p.add_argument("--worker", type=int, metavar="K",
                   help="a cluster (local, or with workers on SSH hosts): signal worker K instead of the run")
    p.add_argument("--json", action="store_true", help="one JSON object, the certificate")
    p.add_argument("--runs-dir", help="folder for the two run directories (default: the user data folder)")
    p.set_defaults(handler=_rehearse)


def _rehearse(args: argparse.Namespace) -> int:
    started = time.monotonic()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, _interrupt)
    try:
        config = _checked_config(args)
        facts = dict(strategy=config.strategy.name, signal=args.signal, worker=args.worker, at=args.at)
        reason = cannot_certify(config)
        if reason is not None:
            return _answer(args, Certificate(False, 0, False, None, None, None, "", "", cannot_certify=reason,
                                             **facts))
        runs_dir = Path(args.runs_dir).expanduser() if args.runs_dir else rundir.default_runs_dir()
        with tempfile.TemporaryDirectory(prefix="rehearse-") as tmp:
            config_file = Path(tmp) / "config.json"
            config.replace(training={"batch_fingerprints": True}).save(config_file)
            rehearsed, interrupted_at, total = _interrupted(config_file, runs_dir, args, Path(tmp))
            resumed_from = _resume(rehearsed, total, Path(tmp))
            reference = _reference(config_file, runs_dir, Path(tmp))
        steps = step_history(reference)
        tol = tolerance_for(r.device for s in steps.values() for r in s.replicas)
        cert = certify(compare_steps(steps, step_history(rehearsed), tol),
                       compare_state(_final_state(reference, total), _final_state(rehearsed, total), tol), tol,
                       str(reference), str(rehearsed), interrupted_at=interrupted_at, resumed_from=resumed_from,
                       seconds=round(time.monotonic() - started, 1), **facts)
    except BadInput as exc:
        print(f"replica-studio rehearse: {exc}", file=sys.stderr, flush=True)
        return EXIT_BAD_INPUT
    except RunFailed as exc:
        _Engine.stop_running()  # a signal that could not be sent leaves its run training: stop it
        print(f"replica-studio rehearse: {exc}", file=sys.stderr, flush=True)
        return EXIT_FAILED
    except Interrupted as exc:
        _Engine.stop_running()
        print(f"replica-studio rehearse: stopped by {exc}; its runs so far are kept", file=sys.stderr, flush=True)
        return EXIT_INTERRUPTED
    return _answer(args, cert)


def _answer(args: argparse.Namespace, cert: Certificate) -> int:
    print(json.dumps(encode(cert)) if args.json else sentences(cert), flush=True)
    return EXIT_OK if cert.equivalent else EXIT_FAILED


def _checked_config(args: argparse.Namespace) -> RunConfig:
    """The config, or BadInput for what no run needs to be started to refuse."""
    try:
        config = RunConfig.load(args.config)
    except ConfigError as exc:
        raise BadInput(str(exc)) from None
    if args.at < 1:
        raise BadInput(f"--at: a step is 1 or more; got {args.at}")
    if args.worker is not None:
        cfg = config.strategy
        if cfg.name not in MULTI_WORKER:
            raise BadInput(f"--worker: strategy {cfg.name!r} trains in one process; leave --worker out to signal it")
        if isinstance(cfg.cluster, str):
            raise BadInput(f"--worker: this config's workers run under {cfg.cluster} (strategy.cluster), which "
                           "starts them; rehearse signals the workers train starts: a local cluster's "
                           "(strategy.workers) or those on SSH hosts")
        count = len(cfg.cluster) if isinstance(cfg.cluster, tuple) else cfg.workers
        if not 0 <= args.worker < count:
            raise BadInput(f"--worker: the cluster has workers 0 to {count - 1}; got {args.worker}")
        entry = cfg.cluster[args.worker] if isinstance(cfg.cluster, tuple) else None
        if args.worker > 0 and isinstance(entry, str):
            raise BadInput(f"--worker: worker {args.worker} ({entry}) is started by hand, not by the run; rehearse "
                           "signals the workers train starts: the chief, and those given as {\"host\": ..., "
                           "\"port\": ...} (SSH hosts)")
    return config


class _Engine:
    """One engine process (``train`` or ``resume``), its events read from its stdout."""

    running: list[_Engine] = []
    STOP_GRACE_S = 60.0  # a stopped run checkpoints first; a cluster ends all its workers

    def __init__(self, tmp: Path, *args: str):
        self.log = (tmp / f"{args[0]}-{time.monotonic_ns()}.log").open("w+")
        self.proc = subprocess.Popen(app_command(*args, "--events", "jsonl"), stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=self.log, text=True,
                                     env=app_env({"TF_CPP_MIN_LOG_LEVEL": "2"}))
        _Engine.running.append(self)

    @classmethod
    def stop_running(cls) -> None:
        """Stop the runs still going (SIGTERM: a checkpoint, then the end), killed after the grace.
        Their events are read away meanwhile: a run blocked on a full stdout pipe never stops."""
        for engine in cls.running:
            if engine.proc.poll() is None:
                if engine.proc.stdout is not None:
                    threading.Thread(target=collections.deque, args=(engine.proc.stdout, 0), daemon=True).start()
                engine.proc.terminate()
                try:
                    engine.proc.wait(cls.STOP_GRACE_S)
                except subprocess.TimeoutExpired:
                    engine.proc.kill()
                    engine.proc.wait()

    def events(self) -> Iterator[dict]:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict):
                yield event

    def wait(self) -> int:
        code = self.proc.wait()
        self.log.close()
        _Engine.running.remove(self)
        return code

    def last_line(self) -> str:
        lines = [line for line in Path(self.log.name).read_text(errors="replace").splitlines() if line.strip()]
        return lines[-1] if lines else "no message"


def _interrupted(config_file: Path, runs_dir: Path, args: argparse.Namespace, tmp: Path) -> tuple[Path, int, int]:
    """Train until step ``args.at`` has been told, then send the signal. Returns the run's
    directory, the last step it told and its total steps."""
    run = _Engine(tmp, "train", str(config_file), "--runs-dir", str(runs_dir))
    run_dir, total, last, sent = None, 0, 0, False
    # A cluster of listed workers (SSH hosts): worker K's process is found by the run's record of
    # its reports; a local cluster's among the launcher's children, by its TF_CONFIG.
    by_record = args.worker is not None and isinstance(RunConfig.load(config_file).strategy.cluster, tuple)
    for event in run.events():
        if event.get("type") == "run_started":
            run_dir, total = Path(event["run_dir"]), int(event.get("total_steps") or 0)
            if args.at > total:
                run.proc.send_signal(signal.SIGKILL)
                run.wait()
                shutil.rmtree(run_dir, ignore_errors=True)  # ours, made for nothing
                raise BadInput(f"--at: step {args.at} is beyond the run's {total} steps")
        elif event.get("type") == "step":
            last = max(last, int(event["step"]))
            if not sent and last >= args.at:
                if by_record:
                    assert run_dir is not None  # run_started came first
                    _signal_recorded(_recorded_worker(run_dir, args.worker), args.signal)
                else:
                    os.kill(_target(run.proc.pid, args.worker), SIGNALS[args.signal])
                sent = True
    code = run.wait()
    if run_dir is None:
        raise (BadInput if code == EXIT_BAD_INPUT else RunFailed)(f"the run did not start: {run.last_line()}")
    if not sent:
        raise RunFailed(f"the run ended (exit {code}) before step {args.at}: {run.last_line()}")
    return run_dir, last, total


def _target(launcher: int, worker: int | None) -> int:
    """The process to signal: the run's own, or worker K of the local cluster it launched."""
    if worker is None:
        return launcher
    for pid in _children(launcher):
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        for entry in environ:
            if entry.startswith(b"TF_CONFIG="):
                task = json.loads(entry[len(b"TF_CONFIG="):]).get("task", {})
                if task.get("type") == "worker" and task.get("index") == worker:
                    return pid
    raise RunFailed(f"worker {worker}'s process was not found among the run's processes")


def _recorded_worker(run_dir: Path, worker: int) -> WorkerProcessRecord:
    """Worker ``worker`` of a cluster with SSH hosts, as the launcher recorded it from the worker's
    own status reports (its pid on its host); RunFailed when it is not recorded in time."""
    deadline = time.monotonic() + RECORD_WAIT_S
    while True:
        found = read_workers(run_dir).get(worker)
        if found is not None:
            return found
        if time.monotonic() > deadline:
            raise RunFailed(f"worker {worker}'s process is not in {run_dir / 'workers.json'} after "
                            f"{RECORD_WAIT_S:g} s (its status reports did not reach the launcher)")
        time.sleep(0.2)


def _signal_recorded(worker: WorkerProcessRecord, name: str) -> None:
    """Send the signal to a recorded worker: here with ``kill``, on its SSH host with ``kill`` over
    ssh (the run's shared connection, the user's hosts file), as a user would there."""
    if worker.host is None:
        try:
            os.kill(worker.pid, SIGNALS[name])
        except ProcessLookupError:
            raise RunFailed(f"worker {worker.worker}'s process {worker.pid} had ended before the signal") from None
        return
    try:
        run_shell(find_host(worker.host), f"kill -{name} {int(worker.pid)}", timeout=60)
    except (HostError, HostsFileError) as exc:
        raise RunFailed(f"worker {worker.worker} on {worker.host}: the signal could not be sent: {exc}") from None


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*/children"):
        found += [int(p) for p in task.read_text().split()]
    return found


def _resume(run_dir: Path, total: int, tmp: Path) -> int | None:
    """``replica-studio resume RUN_DIR`` as a user would; the step it resumed from. None when
    the run had completed by itself (a cluster that restarted from its checkpoint)."""
    if rundir.read_run(run_dir).status == "completed":
        restarts = [e for e in rundir.read_raw_events(run_dir) if isinstance(e, RunStarted)]
        return restarts[-1].start_step if len(restarts) > 1 else None
    run = _Engine(tmp, "resume", str(run_dir))
    start = None
    for event in run.events():
        if event.get("type") == "run_started" and start is None:
            start = event.get("start_step")
    code = run.wait()
    if code != EXIT_OK or rundir.read_run(run_dir).status != "completed":
        raise RunFailed(f"the resume of {run_dir} did not complete (exit {code}): {run.last_line()}")
    return start


def _reference(config_file: Path, runs_dir: Path, tmp: Path) -> Path:
    run = _Engine(tmp, "train", str(config_file), "--runs-dir", str(runs_dir))
    run_dir = None
    for event in run.events():
        if event.get("type") == "run_started" and run_dir is None:
            run_dir = Path(event["run_dir"])
    code = run.wait()
    if run_dir is None or code != EXIT_OK:
        raise RunFailed(f"the reference run did not complete (exit {code}): {run.last_line()}")
    return run_dir


def _final_state(run_dir: Path, total: int) -> dict[str, np.ndarray]:
    """The run's final state by name: ``model/...`` every weight of its model file (the
    non-trainable ones too: moving statistics, random generators' state), ``optimizer/...`` the
    optimizer's variables in the checkpoint of its last step (its slots, its iteration count), and
    the step and data seed; not the save counter, which counts saves."""
    import tensorflow as tf

    prefix = run_dir / rundir.CHECKPOINT_DIR / f"ckpt-{total}"
    try:
        reader = tf.train.load_checkpoint(str(prefix))
    except (ValueError, tf.errors.OpError) as exc:
        raise RunFailed(f"{prefix}: no final checkpoint to compare ({exc})") from None
    state = {}
    for name, dtype in reader.get_variable_to_dtype_map().items():
        if name.startswith(("save_counter", "optimizer/_trainable_variables/")) or dtype == tf.string:
            continue  # the trainable variables are the model's, compared from its file below
        state[name] = np.asarray(reader.get_tensor(name))
    return state | _model_weights(run_dir / rundir.MODEL_FILE)


def _model_weights(path: Path) -> dict[str, np.ndarray]:
    """Every variable of a ``.keras`` file (a zip holding ``model.weights.h5``), by its path there."""
    import io
    import zipfile

    import h5py

    weights: dict[str, np.ndarray] = {}
    try:
        with zipfile.ZipFile(path) as archive, h5py.File(io.BytesIO(archive.read("model.weights.h5")), "r") as h5:
            h5.visititems(lambda name, item: weights.__setitem__(f"model/{name}", np.asarray(item))
                          if isinstance(item, h5py.Dataset) else None)
    except (OSError, KeyError, zipfile.BadZipFile) as exc:
        raise RunFailed(f"{path}: cannot read the model's weights ({exc})") from None
    return weights
