"""``train`` with ``parameter_server``: this process is the coordinator (TensorFlow's "chief").

It starts the worker and ps processes on free loopback ports (or, with ``strategy.cluster:
"tf_config"``, finds them in TF_CONFIG, e.g. under Kubeflow), waits until they serve, and runs
the training session, whose controller schedules the steps (engine/training/steps.py) and calls
:class:`ServerWatch` after each step group. A dead worker is a warning -- the coordinator
reschedules its steps on the others and the run completes; a dead parameter server ends the
run, named. The servers' ``join()`` never returns, so this process ends them all when the run
is over.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

from gui_app.core import rundir
from gui_app.core.cluster_hosts import free_ports, tf_config
from gui_app.core.events import Warning
from gui_app.engine.cluster.processes import Worker, die_with_parent, pump_stderr
from gui_app.engine.cluster.topology import reachable
from gui_app.engine.errors import ClusterFailed, JoinTimeout, one_line
from gui_app.engine.events import EventWriter
from gui_app.engine.exits import EXIT_BAD_INPUT
from gui_app.engine.session import TrainingSession
from gui_app.engine.training.actions.base import Action, StepGroup
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
        missing = [(job, i, a) for job, i, a in missing if not reachable(a)]
        if missing and time.monotonic() - started > timeout_s:
            names = ", ".join(f"{job} {i} ({a})" for job, i, a in missing)
            raise JoinTimeout(f"{names} never joined within {timeout_s:g} s (strategy.join_timeout_s)")
        if missing:
            time.sleep(0.3)


class ServerWatch(Action):
    """After each step group: a parameter server that died ends the run, named; a worker that
    died is told once, as a warning (the coordinator runs its steps on the others)."""

    def __init__(self, servers: _Servers | None, events: EventWriter, workers: int):
        self.servers, self.events, self.workers = servers, events, workers
        self.step = 0  # the last step group's end, for a failure found later

    def on_steps(self, group: StepGroup) -> None:
        self.step = step = group.last_step
        if self.servers is None:  # a cluster of someone else's processes (TF_CONFIG): nothing to watch here
            return
        for w in self.servers.dead("ps"):
            raise ClusterFailed(f"ps {w.index} at {w.address} {w.how_it_ended()} at step {step}", step)
        for w in self.servers.dead("worker"):
            if ("worker", w.index) not in self.servers.reported:
                self.servers.reported.add(("worker", w.index))
                alive = self.workers - len(self.servers.dead("worker"))
                self.events.emit(Warning(message=f"worker {w.index} at {w.address} {w.how_it_ended()} at step "
                                                 f"{step}; the coordinator runs its steps on the {alive} other "
                                                 "worker(s)", worker=w.index, step=step))


def run_parameter_servers(session: TrainingSession) -> tuple[str, int]:
    """Start (or find) the cluster and run ``session`` as its coordinator; (status, step)."""
    config, run_dir, events = session.config, session.run_dir, session.events
    cfg = config.strategy
    servers = None
    if cfg.cluster == "tf_config":
        if not os.environ.get("TF_CONFIG"):
            raise ClusterFailed("TF_CONFIG: not set (strategy.cluster is tf_config)", 0, "config", EXIT_BAD_INPUT)
        cluster = json.loads(os.environ["TF_CONFIG"])["cluster"]
    else:
        ports = free_ports(1 + cfg.workers + cfg.ps)
        addresses = [f"127.0.0.1:{p}" for p in ports]
        cluster = {"chief": addresses[:1], "worker": addresses[1:1 + cfg.workers], "ps": addresses[1 + cfg.workers:]}
        servers = _Servers(str(run_dir / rundir.CONFIG_FILE), cluster)
        os.environ["TF_CONFIG"] = tf_config(cluster, "chief", 0)
    watch = ServerWatch(servers, events, cfg.workers)
    try:
        started = time.monotonic()
        _wait_until_serving(cluster, cfg.join_timeout_s)
        events.emit(Warning(message=f"parameter-server cluster of {len(cluster.get('worker', []))} worker(s) and "
                                    f"{len(cluster.get('ps', []))} ps serving after "
                                    f"{time.monotonic() - started:.1f} s"))
        return session.run(actions=(watch,))
    except JoinTimeout as exc:
        raise ClusterFailed(f"cluster: {exc}", 0) from None
    except ClusterFailed:
        raise
    except Exception as exc:
        if servers is not None and servers.dead("ps"):
            w = servers.dead("ps")[0]
            raise ClusterFailed(f"ps {w.index} at {w.address} {w.how_it_ended()} at step {watch.step}: "
                                f"{one_line(exc)}", watch.step) from None
        raise
    finally:
        if servers is not None:
            servers.kill_all()
