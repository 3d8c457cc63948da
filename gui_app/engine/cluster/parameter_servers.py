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
import time

from gui_app.core import rundir
from gui_app.core.cluster_addresses import free_ports, tf_config
from gui_app.core.events import Warning
from gui_app.engine.cluster.processes import WorkerProcess, kill_all, start_process
from gui_app.engine.cluster.topology import wait_until_reachable
from gui_app.engine.run.event_writer import EventWriter
from gui_app.engine.run.exits import EXIT_BAD_INPUT
from gui_app.engine.run.failures import ClusterFailed, JoinTimeout, one_line
from gui_app.engine.training.actions.base import Action, StepGroup
from gui_app.engine.training.session import TrainingSession
from gui_app.identity import app_command


class _Servers:
    """The worker and ps processes started here."""

    def __init__(self, config_file: str, cluster: dict[str, list[str]]):
        command = app_command("worker", config_file, "--events", "none")
        self.procs: dict[str, list[WorkerProcess]] = {
            job: [start_process(i, address, command, {"TF_CONFIG": tf_config(cluster, job, i)})
                  for i, address in enumerate(cluster[job])]
            for job in ("ps", "worker")}
        self.reported: set[tuple[str, int]] = set()

    def dead(self, job: str) -> list[WorkerProcess]:
        return [w for w in self.procs[job] if w.proc.poll() is not None]

    def kill_all(self) -> None:
        kill_all(w for ws in self.procs.values() for w in ws)


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
        wait_until_reachable([(f"{job} {i}", address) for job in ("worker", "ps")
                              for i, address in enumerate(cluster.get(job, []))], cfg.join_timeout_s)
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
