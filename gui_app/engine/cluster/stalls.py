"""The stall watch over a multi-worker cluster: the workers' status reports
(engine/cluster/status_reports.py) in, ``stall`` and ``stall_cleared`` events out, while it happens.
One watch, two hosts: the launcher of a local or SSH-host cluster (engine/cluster/launcher.py), and
the chief worker of a cluster a scheduler runs, which has no launcher (engine/cluster/chief_watch.py).
Each hands it the workers as it sees them (:class:`Watched`): the launcher its processes, the chief
its peers, which it knows only by their reports.

A stall is the clock's: no step has finished for :data:`STALL_FACTOR` times the recent time
between two step groups, and at least :data:`STALL_MIN_S` -- seconds, well before TensorFlow's
own heartbeat check ends the cluster (8-11 s after a worker froze, measured here). It is not
a stall while every worker answers and one at least is busy with the run's work between steps
(a checkpoint, the validation) for up to :data:`TOGETHER_S`, nor while the run is paused, nor before the first
groups (the cluster forms and traces), nor after the last step; when every worker answers from
its step and none stands out (the cluster is slow, nobody holds it up), not before
:data:`UNNAMED_MIN_S`. The worker that holds the others up is, in this order: one whose process
ended, one whose process is stopped (``/proc``: SIGSTOP, a debugger; for a worker on an SSH host
that stopped answering, its ``/proc`` read there over the run's shared connection), one that stopped
answering, one in another phase than the others (they wait for it in a collective), one whose
last step is behind theirs. Its words are finding_rules.py's (``diagnose`` and the window read
the event).

No TensorFlow: the launcher runs none.
"""
from __future__ import annotations

import json
import secrets
import socket
import statistics
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from gui_app.core.events import Stall, StallCleared, WorkerStatus
from gui_app.core.finding_rules import stall_sentence
from gui_app.core.live_runs import local_state_code, state_code
from gui_app.core.ssh import HostError, run_shell
from gui_app.core.ssh_hosts import Host
from gui_app.engine.cluster.status_reports import REPORT_S

STALL_FACTOR = 5.0
STALL_MIN_S = 2.0
TOGETHER_S = 60.0  # every worker checkpointing or validating together: not a stall for this long
UNNAMED_MIN_S = 6.0  # every worker answers in its step and none stands out: the cluster is slow, not held up
FIRST_GROUPS = 3  # the first groups trace the step function: no stall before this many arrived
ANSWER_S = 4 * REPORT_S  # a worker whose last report is older does not answer
WAITING = ("training", "agreeing")  # phases that wait in a collective for the other workers
GROUP_GAP_S = 0.005  # steps relayed closer than this came from one step group
GROUPS = 20  # the recent groups the expected time is the median of
REMOTE_STATE_S = 5.0  # the ssh call that reads a host's /proc: the watch loop waits for it once per stall
_PROC_STATES = {"R": "running", "S": "sleeping", "D": "disk sleep", "T": "stopped", "t": "tracing stop",
                "Z": "zombie", "I": "idle"}


def os_state(pid: int) -> str | None:
    """``T (stopped)``: a process's state from ``/proc`` on this machine, None when unreadable."""
    return _worded(local_state_code(pid))


def remote_os_state(host: Host, pid: int, timeout: float = REMOTE_STATE_S) -> str | None:
    """The state of process ``pid`` on ``host`` from its ``/proc`` there, read over ssh (the
    cluster's shared connection, so one round trip); None when ssh or the file fails."""
    try:
        return _state_of(run_shell(host, f"cat /proc/{int(pid)}/stat", timeout=timeout))
    except HostError:
        return None


def _state_of(stat: str) -> str | None:
    """``/proc/PID/stat``'s state letter, with its word: ``T (stopped)``."""
    return _worded(state_code(stat))


def _worded(code: str | None) -> str | None:
    return None if code is None else f"{code} ({_PROC_STATES.get(code, '?')})"


class Watched(Protocol):
    """A worker as the watching side sees it."""

    index: int
    host: str | None  # where it runs when not on this machine (an SSH host, a scheduler's node)

    def exit_code(self) -> int | None:
        """Its exit status once its process ended; None while it runs, or when this side cannot tell."""

    def local_pid(self) -> int | None:
        """Its process id when its ``/proc`` is on this machine; None otherwise."""


class StatusBoard:
    """The UDP socket the workers report to, and the last report of each (by worker index).
    The launcher's takes any free port and a fresh token; a scheduler-run chief's binds the
    port number of its own gRPC address (UDP: no clash with TensorFlow's TCP server) with the
    token every worker derives from the run, as the workers cannot be told either."""

    def __init__(self, bind_host: str = "127.0.0.1", port: int = 0, token: str | None = None):
        self.token = token or secrets.token_hex(8)  # a stray or old datagram is not this run's
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._socket.bind((bind_host, port))
        self.port = self._socket.getsockname()[1]
        self.reports: dict[int, tuple[float, dict]] = {}  # worker -> (monotonic time received, report)
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._receive, name="status-board", daemon=True)
        self._thread.start()

    def address_for(self, host: str) -> str:
        """The ``--status-to`` value of a worker that reaches this machine as ``host``."""
        return f"{host}:{self.port}:{self.token}"

    def latest(self) -> dict[int, tuple[float, dict]]:
        with self._lock:
            return dict(self.reports)

    def close(self) -> None:
        self._socket.close()  # the receiving thread ends on the closed socket's error

    def _receive(self) -> None:
        while True:
            try:
                data = self._socket.recv(65536)
            except OSError:
                return
            try:
                report = json.loads(data)
                worker = int(report["worker"])
            except (ValueError, KeyError, TypeError):
                continue
            if report.get("token") == self.token:
                with self._lock:
                    self.reports[worker] = (time.monotonic(), report)


@dataclass
class StallWatch:
    """Applies the rule to the steps the run emits and the workers' reports."""

    board: StatusBoard
    workers: Sequence[Watched]
    hosts: dict[int, Host] = field(default_factory=dict)  # the SSH host of each worker there, by index
    minimum: float = STALL_MIN_S
    stall: Stall | None = None  # the stall now, once told
    total_steps: int = 0  # the run's last step (its run_started): after it, the test set is evaluated
    _groups: list[float] = field(default_factory=list)  # monotonic arrival of each recent step group
    _last_arrival: float = 0.0
    _last_step: int = 0
    _last_step_time: float = 0.0  # wall clock of the last step, for the event's figures

    def on_step(self, step: int, now: float | None = None) -> StallCleared | None:
        """A step was relayed; the ``stall_cleared`` event when it ends a stall."""
        now = time.monotonic() if now is None else now
        if now - self._last_arrival > GROUP_GAP_S:
            self._groups = [*self._groups[-GROUPS:], now]
        self._last_arrival, self._last_step, self._last_step_time = now, step, time.time()
        if self.stall is None:
            return None
        cleared = StallCleared(step=step, seconds=round(self.stall.seconds + (now - self._stall_seen), 1))
        self.stall = None
        return cleared

    def expected(self) -> float | None:
        """The recent time between two step groups (None before two groups)."""
        gaps = [b - a for a, b in zip(self._groups, self._groups[1:])]
        return statistics.median(gaps) if gaps else None

    def check(self, paused: bool, now: float | None = None) -> Stall | None:
        """The ``stall`` event when one begins now (once per stall), else None."""
        now = time.monotonic() if now is None else now
        if self.stall is not None or len(self._groups) < FIRST_GROUPS or paused:
            return None
        if 0 < self.total_steps <= self._last_step or any(w.exit_code() == 0 for w in self.workers):
            return None  # the steps are done: the chief saves and evaluates, the others have ended
        expected = self.expected() or 0.0
        silent = now - self._last_arrival
        if silent < max(self.minimum, STALL_FACTOR * expected):
            return None
        workers = [self.status(w, now) for w in self.workers]
        phases = {s.phase for s in workers}
        if all(s.state == "running" for s in workers) and phases - set(WAITING):
            # Every worker answers and one at least does the run's own work between steps (a
            # checkpoint, the validation, the next epoch's input) while the others wait for it
            # in a collective: the run's work, not a worker holding it up -- for a while.
            if phases == {"paused"} or silent < TOGETHER_S:
                return None
        worker, reason = culprit(workers)
        if worker is None and silent < UNNAMED_MIN_S:
            return None
        self.stall = Stall(worker=worker, reason=reason, since_step=self._last_step, seconds=round(silent, 1),
                           expected_seconds=round(expected, 4) if expected else None, workers=workers)
        self._stall_seen = now
        return self.stall

    def status(self, w: Watched, now: float) -> WorkerStatus:
        """Worker ``w`` as this side sees it: its report, its process (``/proc`` when it runs here;
        on its SSH host, read there when it stopped answering: its pid is the one it reported; on
        a scheduler's other node, nothing: it answers or it does not)."""
        received, report = self.board.latest().get(w.index, (None, {}))
        answering = received is not None and now - received < ANSWER_S
        pid_here = w.local_pid()
        ended = w.exit_code()
        proc_state = None
        if ended is None:  # for a worker on an SSH host its end is its ssh client's
            if pid_here is not None:
                proc_state = os_state(pid_here)
            elif not answering and isinstance(report.get("pid"), int) and w.index in self.hosts:
                proc_state = remote_os_state(self.hosts[w.index], report["pid"])
        if ended is not None:
            state = "gone"
        elif proc_state and proc_state[0] in "Tt":
            state = "stopped"
        elif answering:
            state = "running"
        else:
            state = "not answering"
        return WorkerStatus(worker=w.index, state=state, os_state=proc_state, phase=report.get("phase"),
                            last_step=report.get("last_step"), phase_seconds=report.get("phase_seconds"),
                            stack=list(report.get("stack") or []), host=w.host or report.get("host"),
                            pid=pid_here if pid_here is not None else report.get("pid"))

    def stopped(self) -> list[int]:
        """The workers the stall now found stopped (SIGSTOP, a debugger), here or on their hosts."""
        return [s.worker for s in self.stall.workers if s.state == "stopped"] if self.stall else []

    def context(self) -> str:
        """The stall now, in words for the run's error when TensorFlow's heartbeat check ends the
        cluster (empty without one)."""
        if self.stall is None:
            return ""
        return "; before it: " + stall_sentence(self.stall)


def culprit(workers: list[WorkerStatus]) -> tuple[int | None, str]:
    """(the worker holding the others up, why); (None, why) when none stands out."""
    for state, why in (("gone", "its process ended"), ("stopped", "its process is stopped ({os})"),
                       ("not answering", "it stopped answering (its reports stopped)")):
        for s in workers:
            if s.state == state:
                return s.worker, why.format(os=s.os_state or "T")
    phases = [s.phase for s in workers]
    for s in workers:
        others = [p for p in phases if p != s.phase]
        if s.phase != "training" and others and all(p == "training" for p in others):
            return s.worker, f"it is {s.phase} while the others wait in the step's all-reduce"
    steps = [s.last_step for s in workers if s.last_step is not None]
    if steps and min(steps) < max(steps) and steps.count(min(steps)) == 1:
        behind = next(s for s in workers if s.last_step == min(steps))
        return behind.worker, f"it is behind (step {behind.last_step}, the others {max(steps)})"
    return None, "every worker answers and waits in the same phase: none stands out"
