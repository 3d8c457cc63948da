"""``train`` with ``parameter_server``: this process is the coordinator (TensorFlow's "chief").

It starts the worker and ps processes on free loopback ports (or, with ``strategy.cluster:
"tf_config"``, finds them in TF_CONFIG, e.g. under Kubeflow), waits until they serve, and runs
the ClusterCoordinator loop. A dead worker is a warning -- the coordinator reschedules its
steps on the others and the run completes; a dead parameter server ends the run, named. The
servers' ``join()`` never returns, so this process ends them all when the run is over.
"""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

from gui_app.core import rundir
from gui_app.core.cluster_hosts import free_ports, tf_config
from gui_app.core.config import RunConfig
from gui_app.core.training.loop import ACCURACY, EXAMPLES, GRAD_NORM, LOSS, STEP_TIME, summarize_step
from gui_app.engine.cluster.processes import ClusterFailed, Worker, die_with_parent, pump_stderr
from gui_app.engine.cluster.topology import JoinTimeout, _reachable
from gui_app.engine.control import Control
from gui_app.engine.errors import TrainingDiverged
from gui_app.engine.events import EventWriter
from gui_app.engine.runner import RunController
from gui_app.identity import app_command, app_env


class _Servers:
    """The worker and ps processes started here."""

    def __init__(self, config_file: str, cluster: dict[str, list[str]]):
        self.procs: dict[str, list[Worker]] = {"worker": [], "ps": []}
        self.reported: set[tuple[str, int]] = set()
        for job in ("ps", "worker"):
            for i, address in enumerate(cluster[job]):
                proc = subprocess.Popen(
                    app_command("worker", config_file, "--events", "none"), stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, bufsize=1,
                    env=app_env({"TF_CONFIG": tf_config(cluster, job, i)}),
                    preexec_fn=die_with_parent if sys.platform == "linux" else None)
                w = Worker(i, address, proc)
                w.job = job
                threading.Thread(target=pump_stderr, args=(w,), daemon=True).start()
                self.procs[job].append(w)

    def dead(self, job: str) -> list[Worker]:
        return [w for w in self.procs[job] if w.proc.poll() is not None]

    def kill_all(self) -> None:
        for ws in self.procs.values():
            for w in ws:
                if w.proc.poll() is None:
                    w.proc.kill()
        for ws in self.procs.values():
            for w in ws:
                try:
                    w.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    pass


def _wait_until_serving(cluster: dict[str, list[str]], timeout_s: float) -> None:
    started = time.monotonic()
    missing = [(job, i, a) for job in ("worker", "ps") for i, a in enumerate(cluster.get(job, []))]
    while missing:
        missing = [(job, i, a) for job, i, a in missing if not _reachable(a)]
        if missing and time.monotonic() - started > timeout_s:
            names = ", ".join(f"{job} {i} ({a})" for job, i, a in missing)
            raise JoinTimeout(f"{names} never joined within {timeout_s:g} s (strategy.join_timeout_s)")
        if missing:
            time.sleep(0.3)


class PSController(RunController):
    """The RunController's epochs, validation, checkpoints and events around scheduled steps."""

    def __init__(self, ctx, run_dir: Path, events: EventWriter, control: Control, watch=None):
        import tensorflow as tf

        from gui_app.core.training.evaluation import Evaluator
        from gui_app.core.training.models import outputs_logits
        from gui_app.core.training.ps_loop import PSTrainer

        self.ctx, self.run_dir, self.events, self.control = ctx, run_dir, events, control
        built = ctx.built
        logits = outputs_logits(ctx.model)
        self.trainer = PSTrainer(built.strategy, built.coordinator, ctx.model, ctx.optimizer,
                                 ctx.config.training.global_batch_size, logits)
        # Validation and the test run on the coordinator, reading the variables from the ps tasks
        # (TensorFlow's "inline evaluation"); the training strategy cannot iterate datasets here.
        self.evaluator = Evaluator(tf.distribute.get_strategy(), ctx.model, ctx.dataset.num_classes, logits)
        self.ps_built = built
        from dataclasses import replace

        ctx.built = replace(built, strategy=tf.distribute.get_strategy())
        self._start_bookkeeping()
        self.watch = watch or (lambda step: None)

    def _emit_worker_steps(self, rows: np.ndarray, first_step: int, epoch: int, seconds: float) -> None:
        lrs = self._learning_rates(first_step, len(rows))
        writer = self._tensorboard()[0]
        devices = self.ps_built.devices
        for i, row in enumerate(rows):
            w = int(row[-1])
            loss, acc = summarize_step(row[np.newaxis, :-1])
            step = first_step + i + 1
            entry = {"replica": max(w, 0), "worker": w, "device": devices[w] if 0 <= w < len(devices) else None,
                     "loss": float(row[LOSS]), "accuracy": float(row[ACCURACY]), "examples": int(row[EXAMPLES]),
                     "grad_norm": float(row[GRAD_NORM]), "step_time": float(row[STEP_TIME]),
                     "examples_per_sec": float(row[EXAMPLES] / row[STEP_TIME]) if row[STEP_TIME] > 0 else None,
                     "memory_bytes": None, "peak_memory_bytes": None}
            self.events.emit("step", step=step, epoch=epoch + 1, loss=loss, accuracy=acc,
                             learning_rate=float(lrs[i]), examples_per_sec=float(row[EXAMPLES]) * len(rows) / seconds,
                             step_time=seconds / len(rows), replicas=[entry], per_worker=True)
            writer.scalars(step, {"loss": loss, "accuracy": acc, f"worker_{w}/loss": float(row[LOSS])})

    def train(self) -> str:
        from gui_app.core.training.ps_loop import per_worker_dataset

        ctx, cfg = self.ctx, self.ctx.config.training
        spe, total = ctx.steps_per_epoch, ctx.total_steps
        iterator = per_worker_dataset(self.ps_built.coordinator, ctx.splits.x_train, ctx.splits.y_train,
                                      cfg.global_batch_size, ctx.data_seed)
        # Enough steps in flight to keep every worker busy between two joins.
        group = cfg.steps_per_call * max(1, self.ps_built.num_workers)
        step = int(ctx.step.numpy())
        while step < total:
            epoch = step // spe
            epoch_end = (epoch + 1) * spe
            started, losses, accs = time.perf_counter(), [], []
            while step < epoch_end:
                self._pause_if_asked(step)
                if self.control.stop_requested:
                    self.save_checkpoint()
                    return "stopped"
                k = min(group, epoch_end - step)
                t0 = time.perf_counter()
                rows = self.trainer.train(iterator, k)
                seconds = time.perf_counter() - t0
                ctx.step.assign_add(k)
                if not np.all(np.isfinite(rows[:, LOSS])):
                    raise TrainingDiverged(f"the loss became NaN or infinite near step {step + 1}; "
                                           "try a lower training.learning_rate")
                self._emit_worker_steps(rows, step, epoch, seconds)
                losses += [float(r[LOSS]) for r in rows]
                accs += [float(r[ACCURACY]) for r in rows]
                step += k
                self.watch(step)
                if self.control.take_checkpoint_request():
                    self.save_checkpoint()
            self._end_epoch(epoch, step, losses, accs, time.perf_counter() - started)
        return "completed"


def run_parameter_servers(config: RunConfig, run_dir: Path, events: EventWriter, control: Control, resume: bool,
                          train, one_line):
    """``train`` is ``session.train_session`` and ``one_line`` its error summary (passed in, so that this
    module does not import the session that calls it)."""
    cfg = config.strategy
    servers = None
    if cfg.cluster == "tf_config":
        if not os.environ.get("TF_CONFIG"):
            raise ClusterFailed("TF_CONFIG: not set (strategy.cluster is tf_config)", 0, "config", 2)
        import json

        cluster = json.loads(os.environ["TF_CONFIG"])["cluster"]
    else:
        ports = free_ports(1 + cfg.workers + cfg.ps)
        addresses = [f"127.0.0.1:{p}" for p in ports]
        cluster = {"chief": addresses[:1], "worker": addresses[1:1 + cfg.workers], "ps": addresses[1 + cfg.workers:]}
        servers = _Servers(str(run_dir / rundir.CONFIG_FILE), cluster)
        os.environ["TF_CONFIG"] = tf_config(cluster, "chief", 0)
    state = {"step": 0}

    def watch(step: int) -> None:
        state["step"] = step
        if servers is None:
            return
        for w in servers.dead("ps"):
            raise ClusterFailed(f"ps {w.index} at {w.address} {w.how_it_ended()} at step {step}", step)
        for w in servers.dead("worker"):
            if ("worker", w.index) not in servers.reported:
                servers.reported.add(("worker", w.index))
                alive = cfg.workers - len(servers.dead("worker"))
                events.emit("warning", message=f"worker {w.index} at {w.address} {w.how_it_ended()} at step {step}; "
                                               f"the coordinator runs its steps on the {alive} other worker(s)",
                            worker=w.index, step=step)

    try:
        started = time.monotonic()
        _wait_until_serving(cluster, cfg.join_timeout_s)
        events.emit("warning", message=f"parameter-server cluster of {len(cluster.get('worker', []))} worker(s) and "
                                       f"{len(cluster.get('ps', []))} ps serving after "
                                       f"{time.monotonic() - started:.1f} s")

        def factory(ctx, run_dir_, events_, control_):
            return PSController(ctx, run_dir_, events_, control_, watch)

        return train(config, run_dir, events, control, resume, controller_factory=factory)
    except JoinTimeout as exc:
        raise ClusterFailed(f"cluster: {exc}", 0) from None
    except ClusterFailed:
        raise
    except Exception as exc:
        if servers is not None and servers.dead("ps"):
            w = servers.dead("ps")[0]
            raise ClusterFailed(f"ps {w.index} at {w.address} {w.how_it_ended()} at step {state['step']}: "
                                f"{one_line(exc)}", state["step"]) from None
        raise
    finally:
        if servers is not None:
            servers.kill_all()
