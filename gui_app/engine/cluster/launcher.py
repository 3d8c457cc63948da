"""``train``/``resume`` of a multi-worker run: this process becomes a small launcher.

It runs no TensorFlow. It picks free loopback ports, starts the worker processes (each with its
own ``TF_CONFIG``) -- or, for a host list, the chief here and the workers of its SSH hosts
(engine/cluster/ssh_workers.py) --, relays the chief's events to its own stdout and the run directory, forwards
stop/pause/checkpoint to the chief (the workers agree on them, engine/cluster/agreement.py), and
watches them all. TensorFlow cannot recover a MultiWorkerMirrored cluster in-process once a
peer failed ("restart your program"), so when one worker dies the launcher kills the rest at
once, names the worker and what happened, and -- with ``strategy.max_restarts`` -- starts the
whole cluster again from the last checkpoint. The window's supervisor keeps starting exactly one
process. On Linux the workers get PR_SET_PDEATHSIG, so a launcher killed with -9 takes them along.
"""
from __future__ import annotations

import contextlib
import os
import queue
import random
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO

from gui_app.core import rundir
from gui_app.core.cluster_addresses import free_ports, tf_config
from gui_app.core.config import RunConfig
from gui_app.core.event_lines import LineDecoder
from gui_app.core.events import Error, Event, RunFinished, RunStarted, Step, Warning
from gui_app.core.live_runs import WorkerProcessRecord, local_state_code, record_workers
from gui_app.engine.cluster.processes import WorkerProcess, kill_all, start_process
from gui_app.engine.cluster.ssh_workers import SshCluster, ssh_cluster
from gui_app.engine.cluster.stalls import StallWatch, StatusBoard
from gui_app.engine.run.control import Control
from gui_app.engine.run.event_writer import EventWriter
from gui_app.engine.run.exits import EXIT_BAD_INPUT
from gui_app.engine.run.failures import ClusterFailed
from gui_app.identity import app_command

POLL_S = 0.1
STOP_GRACE_S = 60.0  # a stopped cluster that has not ended by then is killed (a worker hangs in TensorFlow)
FINISH_GRACE_S = 60.0  # after the chief completed, how long the others may take to end


def _pump_events(stream: IO[str], out: queue.Queue[Event | None]) -> None:
    """The chief's events, decoded (its lean steps with their devices: relayed, they are written
    lean again); a line that is no event goes to stderr."""
    decoder = LineDecoder()
    for line in stream:
        event = decoder.line(line)
        if event is not None:
            out.put(event)
        elif line.strip():
            sys.stderr.write(f"[worker 0] {line.strip()}\n")
    out.put(None)  # the chief's stdout closed


class _Attempt:
    """One start of the cluster."""

    def __init__(self, config: RunConfig, run_dir: Path, events: EventWriter, control: Control, resume: bool,
                 data_seed: int, ssh: SshCluster | None = None, restore_there: dict[int, str] | None = None):
        self.config, self.run_dir, self.events, self.control = config, run_dir, events, control
        self.step = 0
        self.error: Error | None = None  # the chief's: the launcher decides how the run ends
        self.finished: RunFinished | None = None
        self.culprit: WorkerProcess | None = None  # the worker whose end failed the cluster
        self.queue: queue.Queue[Event | None] = queue.Queue()  # the chief's events; None: its stdout closed
        cfg = config.strategy
        local = cfg.workers if cfg.cluster is None else 1  # a host list / scheduler: only the chief is here
        ports = free_ports(local) if cfg.cluster is None else []
        cluster = {"worker": [f"127.0.0.1:{p}" for p in ports]}
        self.workers: list[WorkerProcess] = []
        config_file = str(ssh.config_file if ssh else run_dir / rundir.CONFIG_FILE)
        # The workers' status reports (status_reports.py): here on loopback; from SSH hosts to the
        # chief's address in the cluster list, which they reach for gRPC anyway.
        # REPLICA_STUDIO_STATUS_REPORTS=0 leaves them out (benchmarks/bench_status_reports.py: their cost).
        self.board = StatusBoard("0.0.0.0" if ssh is not None else "127.0.0.1")
        reports = os.environ.get("REPLICA_STUDIO_STATUS_REPORTS", "1") != "0"
        for i in range(local):
            cmd = app_command("worker", config_file, "--data-seed", str(data_seed))
            if reports:
                cmd += ["--status-to", self.board.address_for("127.0.0.1")]
            if i == 0:
                cmd += ["--run-dir", str(run_dir), "--events", "jsonl", "--control", "stdin", "--no-events-file"]
                if isinstance(cfg.cluster, tuple):
                    cmd += ["--index", "0"]
                if resume:
                    cmd.append("--resume")
            else:
                cmd += ["--events", "none"]
                if resume:
                    cmd += ["--resume", "--restore-from", str(run_dir / rundir.CHECKPOINT_DIR)]
            extra = {"TF_CONFIG": tf_config(cluster, "worker", i)} if cfg.cluster is None else None
            address = cluster["worker"][i] if ports else (str(cfg.cluster[0]) if isinstance(cfg.cluster, tuple)
                                                          else "this machine")
            pipe = subprocess.PIPE if i == 0 else subprocess.DEVNULL  # the chief's events and control lines
            worker = start_process(i, address, cmd, extra, stdin=pipe, stdout=pipe)
            if i == 0:
                events_reader = threading.Thread(target=_pump_events, args=(worker.proc.stdout, self.queue),
                                                 daemon=True)
                worker.threads.append(events_reader)
                events_reader.start()
            self.workers.append(worker)
        if ssh is not None:  # the workers it starts over ssh
            chief_host = ssh.addresses[0].rpartition(":")[0].strip("[]")
            self.workers += [ssh.start(i, data_seed, resume, (restore_there or {}).get(i),
                                       self.board.address_for(chief_host) if reports else None) for i in ssh.hosts]
        self._sent = {"stop": False, "pause": False}
        self.stalls = StallWatch(self.board, self.workers, dict(ssh.hosts) if ssh is not None else {})
        self._recorded: dict[int, int] = {}  # worker -> the pid workers.json names

    # ---- the chief's events and the window's commands -----------------------------------
    def _relay(self) -> bool:
        """Pass on the chief's events; False once its stdout closed."""
        while True:
            try:
                event = self.queue.get_nowait()
            except queue.Empty:
                return True
            if event is None:
                return False
            if isinstance(event, Error):
                self.error = event
            elif isinstance(event, RunFinished):
                self.finished = event
            else:
                # A window that went away is the writer's to notice: it stops the run (commands/train.py).
                self.events.emit(event)
                if isinstance(event, RunStarted):
                    self.stalls.total_steps = event.total_steps
                if isinstance(event, Step):
                    self.step = max(self.step, event.step)
                    cleared = self.stalls.on_step(event.step)
                    if cleared is not None:
                        self.events.emit(cleared)

    def _tell_chief(self, word: str) -> None:
        stdin = self.workers[0].proc.stdin
        assert stdin is not None  # the chief's stdin is a pipe
        try:
            stdin.write(word + "\n")
            stdin.flush()
        except (OSError, ValueError):
            pass  # the chief is gone; the watch loop sees it

    def _forward_control(self) -> None:
        c = self.control
        if c.stop_requested and not self._sent["stop"]:
            self._sent["stop"] = True
            self._tell_chief("stop")
        if c.paused != self._sent["pause"] and not c.stop_requested:
            self._sent["pause"] = c.paused
            self._tell_chief("pause" if c.paused else "continue")
        if c.take_checkpoint_request():
            self._tell_chief("checkpoint")

    def _record_workers(self) -> None:
        """``workers.json`` once a worker of this start reports a process id not recorded yet
        (gui_app/core/live_runs.py): ``rehearse --worker K`` signals a worker there by it."""
        reports = {i: r for i, (_, r) in self.board.latest().items() if isinstance(r.get("pid"), int)}
        pids = {i: r["pid"] for i, r in reports.items()}
        if pids == self._recorded:
            return
        self._recorded = pids
        hosts = {w.index: w.host for w in self.workers}
        try:
            record_workers(self.run_dir, [WorkerProcessRecord(i, r["pid"], hosts.get(i), str(r.get("host") or ""))
                                          for i, r in sorted(reports.items())])
        except OSError:
            pass  # a record for others; the run goes on without it

    # ---- watching ---------------------------------------------------------------------------
    def watch(self) -> tuple[str, str | None]:
        """Until the chief finished or a worker failed: (status, failure message or None)."""
        chief = self.workers[0]
        open_stream = True
        stop_at = None
        while True:
            open_stream = self._relay() and open_stream
            self._forward_control()
            self._record_workers()
            stall = self.stalls.check(paused=self.control.paused or self.control.stop_requested)
            if stall is not None:
                self.events.emit(stall)
            if self.control.stop_requested:
                stop_at = stop_at or time.monotonic()
                if time.monotonic() - stop_at > STOP_GRACE_S:
                    kill_all(self.workers)
                    return "failed", f"the cluster did not stop within {STOP_GRACE_S:g} s of the stop; killed it"
            failed = [w for w in self.workers if w.proc.poll() not in (None, 0)]
            if failed:
                # A worker killed by a signal is the cause; peers that then exit with a collective
                # error (UnavailableError) are its victims, whichever the poll saw first.
                culprit = min(failed, key=lambda w: (not w.killed, w.index))
                stopped = [w.index for w in self.workers if w is not culprit and _is_stopped(w.proc)]
                stopped += [i for i in self.stalls.stopped() if i != culprit.index and i not in stopped]  # on a host
                kill_all(self.workers)
                self._relay()
                self.culprit = culprit
                return "failed", self._describe(culprit, stopped)
            if chief.proc.poll() == 0 and not open_stream:
                status = self.finished.status if self.finished else "failed"
                deadline = time.monotonic() + FINISH_GRACE_S
                for w in self.workers[1:]:
                    try:
                        w.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
                    except subprocess.TimeoutExpired:
                        pass
                kill_all(self.workers)
                return status, self.finished.message if self.finished else None
            time.sleep(POLL_S)

    def _describe(self, culprit: WorkerProcess, stopped: list[int]) -> str:
        # Let the chief's last lines arrive: its error names the TensorFlow failure.
        for t in culprit.threads:
            t.join(timeout=2)
        role = " (chief)" if culprit.index == 0 else ""
        what = self.error.message if culprit.index == 0 and self.error else None
        what = what or culprit.last_error
        hung = [i for i in culprit.unhealthy if i != culprit.index]
        hung = hung or stopped  # TensorFlow's heartbeat report may not have arrived: a stopped peer hung
        if hung:  # the chief failed because a peer hung: name the peer
            peer = next((w for w in self.workers if w.index == hung[0]), None)
            where = f" {peer.where}" if peer else ""
            return (f"worker {hung[0]}{where} stopped sending heartbeats (hung or unreachable) at "
                    f"step {self.step}; worker {culprit.index}{role} ended with: {what}{self.stalls.context()}")
        text = f"worker {culprit.index}{role} {culprit.where} {culprit.how_it_ended()} at step {self.step}"
        return (f"{text}: {what}" if what else text) + self.stalls.context()

    @property
    def chief_error_kind(self) -> str | None:
        return self.error.kind if self.error else None


def _is_stopped(proc: subprocess.Popen[str]) -> bool:
    """Alive but stopped (SIGSTOP, a debugger, a frozen container): state T in /proc (Linux)."""
    return proc.poll() is None and local_state_code(proc.pid) in ("T", "t")


def _checkpoint_step(run_dir: Path) -> int:
    steps = [int(p.stem.split("-")[-1]) for p in (run_dir / rundir.CHECKPOINT_DIR).glob("ckpt-*.index")]
    return max(steps, default=0)


def run_cluster(config: RunConfig, run_dir: Path, events: EventWriter, control: Control, resume: bool
                ) -> tuple[str, int]:
    """Train on a cluster; returns (status, step) like ``TrainingSession.run`` or raises ClusterFailed."""
    with ssh_cluster(config) as ssh:
        return _run_attempts(config, run_dir, events, control, resume, ssh)


def _run_attempts(config: RunConfig, run_dir: Path, events: EventWriter, control: Control, resume: bool,
                  ssh: SshCluster | None) -> tuple[str, int]:
    cfg = config.strategy
    seed = config.training.seed if config.training.seed is not None else random.randrange(2**31)
    restarts = 0
    while True:
        started = time.monotonic()
        copies: contextlib.AbstractContextManager[dict[int, str]] = (
            ssh.checkpoints_there(run_dir) if ssh and resume else contextlib.nullcontext({}))
        with copies as there:
            attempt = _Attempt(config, run_dir, events, control, resume, seed, ssh, there)
            try:
                status, message = attempt.watch()
            finally:
                kill_all(attempt.workers)
                attempt.board.close()
        finished = attempt.finished  # the chief's run_finished: how a completed or stopped run ended
        if finished is not None and status in ("completed", "stopped"):
            if status == "stopped" and not control.stop_requested:  # a worker's own signal: run_finished says so
                control.command("stop", finished.message)
            return status, attempt.step if status == "stopped" else finished.step
        kind = attempt.chief_error_kind
        if kind not in ("config", "input") and attempt.culprit and attempt.culprit.proc.returncode == EXIT_BAD_INPUT:
            kind = "input"  # another worker's config or input (a dataset path missing on its host): no restart mends it
        if kind in ("config", "input"):
            raise ClusterFailed(message or "the chief failed", attempt.step, kind, EXIT_BAD_INPUT)
        message = message or "the cluster failed"
        every_worker_here = cfg.cluster is None or ssh is not None  # none started by hand
        can_restart = every_worker_here and restarts < cfg.max_restarts and not control.stop_requested
        if not can_restart:
            raise ClusterFailed(f"{message} ({time.monotonic() - started:.1f} s after the cluster started)",
                                attempt.step)
        restarts += 1
        resume = True
        events.emit(Warning(message=f"{message}; restarting the cluster from the checkpoint at step "
                                    f"{_checkpoint_step(run_dir)} (restart {restarts} of {cfg.max_restarts})",
                            restart=restarts))
