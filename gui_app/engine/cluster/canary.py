"""The all-reduce canary of ``preflight``: TensorFlow's own collectives over the cluster's addresses.

Each worker process (``preflight-canary``, hidden) forms the cluster as a training worker does
(engine/cluster/topology.py: its ``TF_CONFIG`` from the launcher or from ``strategy.cluster``
and ``--index``; the chief waits for its peers; SIGALRM bounds TensorFlow's join), builds the
run's MultiWorkerMirroredStrategy (engine/training/strategies.py, the same communication options),
and all-reduces a tensor of a few MiB a few times. Every replica contributes ``i % 7 + r + 1``
for element ``i`` and replica ``r``, so the exact sum is known and a worker that got another
one is named. The worker prints one JSON line and leaves the cluster as a training worker does
(engine/cluster/leaving.py: a barrier, then no teardown).

:func:`run_canary` starts those processes here with the launcher's own code
(engine/cluster/processes.py: they die with this process, their stderr is relayed with a prefix).
"""
from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import threading
import time
from typing import Any

from gui_app.core.cluster_addresses import tf_config
from gui_app.core.ssh import STDIN_FILE, StdinFile, shell_command, ssh_argv
from gui_app.engine.cluster.processes import WorkerProcess, kill_all, start_process
from gui_app.engine.cluster.ssh_workers import SshCluster
from gui_app.identity import app_command

CANARY_MIB = 4
CANARY_ROUNDS = 5
_START_S = 120.0  # on top of the join timeout: a cold TensorFlow import on a busy machine


def expected_checksum(elements: int, replicas: int) -> float:
    """The sum of every element of the all-reduced tensor (exact in float64 at these sizes)."""
    cycle, rest = divmod(elements, 7)
    per_replica_pattern = cycle * 21 + sum(range(rest))  # sum over i of i % 7
    return float(replicas * per_replica_pattern + elements * replicas * (replicas + 1) // 2)


def canary_worker(config, index: int | None, mib: int, rounds: int) -> dict[str, Any]:
    """In a worker process: form the cluster, all-reduce, return this worker's figures."""
    from gui_app.engine.cluster.topology import arm_join_alarm, resolve_task, wait_for_peers

    task = resolve_task(config.strategy, index)
    if task.tf_config:
        os.environ["TF_CONFIG"] = task.tf_config
    join = config.strategy.join_timeout_s
    if task.is_chief:
        wait_for_peers(task, join)
    arm_join_alarm(join)
    import tensorflow as tf

    from gui_app.engine.training import devices, strategies

    devices.configure_runtime(config.runtime)
    built = strategies.build_strategy(config.strategy)
    if hasattr(signal, "alarm"):
        signal.alarm(0)  # the cluster formed
    strategy = built.strategy
    elements = mib * 2**20 // 4

    @tf.function
    def all_reduce():
        def replica():
            ctx = tf.distribute.get_replica_context()
            r = tf.cast(ctx.replica_id_in_sync_group, tf.float32)
            x = tf.math.floormod(tf.range(elements, dtype=tf.float32), 7.0) + r + 1.0
            return ctx.all_reduce(tf.distribute.ReduceOp.SUM, x)
        return strategy.run(replica)

    def checksum() -> float:
        out = strategy.experimental_local_results(all_reduce())
        return float(tf.reduce_sum(tf.cast(out[0], tf.float64)).numpy())

    started = time.monotonic()
    checksum()  # traces the function and runs the first collective (its setup is not bandwidth)
    first = time.monotonic() - started
    seconds, sums = [], []
    for _ in range(rounds):
        t = time.monotonic()
        sums.append(checksum())
        seconds.append(time.monotonic() - t)
    return {"worker": task.index, "replicas": strategy.num_replicas_in_sync, "bytes": elements * 4,
            "first_s": first, "seconds": seconds, "checksums": sums,
            "expected": expected_checksum(elements, strategy.num_replicas_in_sync), "task": task}


def _over_ssh(ssh: SshCluster, index: int, mib: int, rounds: int) -> WorkerProcess:
    """Canary worker ``index`` on its SSH host, as ssh_workers starts a training worker there: the
    resolved config on stdin, stdin kept open (its end kills the worker there)."""
    host = ssh.hosts[index]
    args: list[str | StdinFile] = ["preflight-canary", STDIN_FILE, "--index", str(index), "--mib", str(mib),
                                   "--rounds", str(rounds)]
    argv = ssh_argv(host, shell_command(host, args, ends_with_input=True))
    worker = start_process(index, ssh.addresses[index], argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                           host=host.name)
    assert worker.proc.stdin is not None
    try:
        worker.proc.stdin.write(ssh.config_line.decode("utf-8"))
        worker.proc.stdin.flush()
    except OSError:
        pass  # ssh ended already: its exit says why
    return worker


def run_canary(config_file: str, addresses: list[str], by_index: bool, join_timeout_s: float,
               mib: int = CANARY_MIB, rounds: int = CANARY_ROUNDS, ssh: SshCluster | None = None) -> dict[str, Any]:
    """Start one canary process per address (``by_index``: the config's own ``strategy.cluster``
    list and ``--index``; else ``TF_CONFIG`` for these addresses; ``ssh``: the workers of its
    hosts there) and summarise: ``{"ok", "workers", "bytes", "seconds_median",
    "bandwidth_per_worker_mib_s", "same_sum", ...}``."""
    cluster = {"worker": addresses}
    procs: list[WorkerProcess] = []
    outputs: dict[int, list[str]] = {}
    started = time.monotonic()
    try:
        for i, address in enumerate(addresses):
            cmd = app_command("preflight-canary", config_file, "--mib", str(mib), "--rounds", str(rounds))
            env = {"TF_CPP_MIN_LOG_LEVEL": "2"}
            if by_index:
                cmd += ["--index", str(i)]
            else:
                env["TF_CONFIG"] = tf_config(cluster, "worker", i)
            if ssh is not None and i in ssh.hosts:
                worker = _over_ssh(ssh, i, mib, rounds)
            else:
                worker = start_process(i, address, cmd, env, stdout=subprocess.PIPE)
            lines = outputs[i] = []
            reader = threading.Thread(target=lambda s=worker.proc.stdout, out=lines: out.extend(s), daemon=True)
            reader.start()
            worker.threads.append(reader)
            procs.append(worker)
        deadline = started + join_timeout_s + _START_S
        for w in procs:
            try:
                w.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                return {"ok": False, "problem": f"worker {w.index} {w.where} did not finish the all-reduce "
                                                f"within {deadline - started:.0f} s"}
            if w.proc.returncode != 0:
                for t in w.threads:
                    t.join(timeout=2)
                said = f": {w.last_error}" if w.last_error else ""
                return {"ok": False, "problem": f"worker {w.index} {w.where} {w.how_it_ended()} during the "
                                                f"all-reduce canary{said}"}
        for w in procs:
            for t in w.threads:
                t.join(timeout=2)
    finally:
        kill_all(procs)
    return summarise(outputs, len(addresses), time.monotonic() - started)


def summarise(outputs: dict[int, list[str]], workers: int, wall_s: float) -> dict[str, Any]:
    figures = []
    for i in range(workers):
        lines = [line for line in outputs.get(i, []) if line.startswith("{")]
        if not lines:
            return {"ok": False, "problem": f"worker {i} printed no all-reduce result"}
        figures.append(json.loads(lines[-1]))
    sums = {c for f in figures for c in f["checksums"]}
    expected = figures[0]["expected"]
    wrong = [f["worker"] for f in figures if any(c != expected for c in f["checksums"])]
    size = figures[0]["bytes"]
    median = statistics.median(s for f in figures for s in f["seconds"])
    # A ring all-reduce sends 2 (n - 1) / n of the tensor from every worker.
    sent = 2 * (workers - 1) / workers * size
    result = {"ok": not wrong, "workers": workers, "replicas": figures[0]["replicas"], "bytes": size,
              "rounds": len(figures[0]["seconds"]), "seconds_median": median,
              "first_round_s": max(f["first_s"] for f in figures), "wall_s": wall_s,
              "bandwidth_per_worker_mib_s": sent / median / 2**20 if median > 0 else None,
              "same_sum": len(sums) == 1 and not wrong}
    if wrong:
        result["problem"] = (f"worker(s) {', '.join(map(str, wrong))} got another all-reduced sum than "
                             f"{expected:.0f}: the collectives disagree")
    return result
