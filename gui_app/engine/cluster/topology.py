"""Where this process sits in a cluster, and waiting for the other workers to join.

TensorFlow-free, so the launcher and the cluster scripts can use it. The cluster comes from
(in order) ``strategy.cluster`` as a list of ``host:port`` (this process is ``--index``),
``"slurm"`` (the step's nodes in Slurm's order, this process is ``SLURM_PROCID``: schedulers/slurm/cluster.py), or
``TF_CONFIG`` (set by our launcher, the Kubeflow training operator, or the user with
``strategy.cluster: "tf_config"``). Each becomes the ``TF_CONFIG`` TensorFlow reads.
"""
from __future__ import annotations

import json
import math
import os
import signal
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from gui_app.core.cluster_addresses import check_resolved, split_host, tf_config
from gui_app.core.config import ConfigError, RunConfig, StrategyConfig
from gui_app.engine.run.failures import JoinTimeout
from gui_app.engine.schedulers.slurm import cluster as slurm

Joined = Callable[[dict[str, Any]], None]  # hears a progress report: how many peers joined


@dataclass
class Task:
    cluster: dict[str, list[str]]  # job -> addresses
    type: str
    index: int
    tf_config: str | None = None  # to put in the environment before TensorFlow starts

    @property
    def is_chief(self) -> bool:
        if self.type == "chief":
            return True
        return self.type == "worker" and self.index == 0 and "chief" not in self.cluster

    @property
    def name(self) -> str:
        return f"{self.type} {self.index}"

    def peers(self) -> list[tuple[str, str]]:
        """(name, address) of every other task the collectives need (not the ps tasks)."""
        return [(f"{job} {i}", address) for job in ("chief", "worker") for i, address in
                enumerate(self.cluster.get(job, [])) if (job, i) != (self.type, self.index)]


def resolve_task(cfg: StrategyConfig, index: int | None) -> Task:
    if isinstance(cfg.cluster, tuple):
        hosts = [h for h in cfg.cluster if isinstance(h, str)]
        if len(hosts) < len(cfg.cluster):  # train resolves them (engine/cluster/ssh_workers.py)
            raise ConfigError("strategy.cluster: names SSH hosts, whose workers replica-studio train starts itself")
        if index is None or not 0 <= index < len(hosts):
            raise ConfigError(f"--index: must be 0 to {len(hosts) - 1} for the {len(hosts)} hosts of "
                              f"strategy.cluster; got {index}")
        try:
            check_resolved(tuple(hosts), cfg.allow_public_hosts)
        except ValueError as exc:
            raise ConfigError(f"strategy.cluster: {exc}") from None
        cluster = {"worker": hosts}
        return Task(cluster, "worker", index, tf_config(cluster, "worker", index))
    if cfg.cluster == "slurm":
        if "SLURM_PROCID" not in os.environ:
            raise ConfigError("strategy.cluster: is slurm but SLURM_PROCID is not set; run the worker with srun "
                              "inside an allocation (replica-studio submit --slurm or cluster-script --slurm); a "
                              "Slurm run continues when its script is submitted again")
        try:
            hosts = slurm.workers(os.environ)
        except ValueError as exc:
            raise ConfigError(f"strategy.cluster: is slurm but {exc}") from None
        cluster = {"worker": hosts}
        index = int(os.environ["SLURM_PROCID"])
        return Task(cluster, "worker", index, tf_config(cluster, "worker", index))
    raw = os.environ.get("TF_CONFIG")
    if not raw:
        where = ("replica-studio train starts local workers itself" if cfg.cluster is None
                 else "strategy.cluster is tf_config")
        raise ConfigError(f"TF_CONFIG: not set ({where})")
    try:
        data = json.loads(raw)
        cluster = {job: list(addresses) for job, addresses in data["cluster"].items()}
        task = data["task"]
        return Task(cluster, task["type"], int(task["index"]))
    except (ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"TF_CONFIG: not a cluster and task description ({exc})") from None


def reachable(address: str) -> bool:
    host, port = split_host(address)
    try:
        with socket.create_connection((host, port), timeout=1.0):
            return True
    except OSError:
        return False


def wait_until_reachable(peers: list[tuple[str, str]], timeout_s: float, advice: str = "",
                         progress: Joined | None = None) -> float:
    """Block until the port of every ``(name, address)`` accepts connections; returns the
    seconds waited. :class:`JoinTimeout` names those still missing after ``timeout_s``, then
    ``advice``; ``progress`` hears how many joined whenever that changes."""
    started = time.monotonic()
    missing, shown = peers, None
    while missing:
        missing = [(name, address) for name, address in missing if not reachable(address)]
        if not missing:
            break
        if time.monotonic() - started > timeout_s:
            names = ", ".join(f"{name} ({address})" for name, address in missing)
            raise JoinTimeout(f"{names} never joined within {timeout_s:g} s (strategy.join_timeout_s){advice}")
        if progress and shown != len(missing):
            shown = len(missing)
            progress({"stage": "joining", "what": "workers", "done": len(peers) - len(missing), "total": len(peers)})
        time.sleep(0.3)
    return time.monotonic() - started


def wait_for_peers(task: Task, timeout_s: float, progress: Joined | None = None) -> float:
    """Block until every peer's gRPC port accepts connections; returns the seconds waited.

    Only the chief waits: the others start their servers at once and wait for the chief, who
    starts its own after this (a peer that is not there yet would make TensorFlow retry for
    minutes before failing with a message that names no host)."""
    return wait_until_reachable(task.peers(), timeout_s, "; start `replica-studio worker CONFIG --index N` there, "
                                "and check that the port is open", progress)


def arm_join_alarm(seconds: float) -> None:
    """Bound the wait inside TensorFlow's cluster start: a non-chief waits there for the chief,
    the chief for every task to register (a port that accepts TCP -- a proxy, another program --
    is not yet a TensorFlow worker). That C++ wait holds the GIL, so no Python thread or signal
    handler could act: SIGALRM with its default action ends the process (the launcher names it)."""
    if hasattr(signal, "alarm"):
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
        signal.alarm(max(1, math.ceil(seconds)))


def load_config(path: str, allow_public_hosts: bool = False, cluster: str | None = None) -> RunConfig:
    if not allow_public_hosts and not cluster:
        return RunConfig.load(path)
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"config: cannot read {path}: {exc}") from None
    strategy = data.setdefault("strategy", {})
    if allow_public_hosts:
        strategy["allow_public_hosts"] = True
    if cluster:  # the scheduler's cluster replaces the local one (the same config file runs both ways)
        strategy.update({"cluster": cluster, "workers": 0})
    return RunConfig.from_dict(data)
