"""The stall watch of a cluster a scheduler runs (Slurm, Kubernetes, TF_CONFIG): hosted by the chief.

Such a cluster has no launcher -- every task is ``replica-studio worker`` and the chief (worker 0)
writes the run's events --, so the chief hosts what the launcher hosts for a local or SSH-host
cluster: the board the workers report to (engine/cluster/stalls.py's :class:`StatusBoard`) and the
one :class:`StallWatch`, in a daemon thread that writes ``stall`` / ``stall_cleared`` into the run's
events while the training thread waits in the collective.

How the workers find it without being told: the board binds the port number of the chief's own
address in the scheduler's cluster spec, over UDP (TensorFlow's gRPC server holds the TCP one),
and the token is derived from the run identity every worker computes alike
(engine/cluster/run_identity.py): another job's stray datagram is dropped.

What the chief can see: its own process (its report, its ``/proc``) and, of every other worker,
only its reports -- the other nodes' ``/proc`` is not here. A worker that stops reporting (frozen,
its node gone, the network cut) is "not answering"; its phase, last step and stack are those of
its last report. ``REPLICA_STUDIO_STATUS_REPORTS=0`` leaves all of it out, as for the launcher.
"""
from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TextIO

from gui_app.core.cluster_addresses import split_host
from gui_app.core.events import Event, RunStarted, Step
from gui_app.engine.cluster.run_identity import run_identity
from gui_app.engine.cluster.stalls import StallWatch, StatusBoard
from gui_app.engine.cluster.status_reports import StatusReporter
from gui_app.engine.cluster.topology import Task
from gui_app.engine.run.event_writer import EventWriter

REPORTS_ENV = "REPLICA_STUDIO_STATUS_REPORTS"
CHECK_S = 0.25  # how often the chief's watch applies the rule (a stall is 2 s at least)


def wanted(task: Task, env: Mapping[str, str] = os.environ) -> bool:
    """Whether this worker of a scheduler-run cluster takes part: reports on, and a cluster of
    workers only (a ``chief`` job numbers its tasks apart; its watch is left out)."""
    return env.get(REPORTS_ENV, "1") != "0" and "chief" not in task.cluster and len(task.cluster.get("worker", [])) > 1


def board_address(task: Task) -> tuple[str, int]:
    """(host, port) of the chief's board: its address in the cluster spec."""
    return split_host(task.cluster["worker"][0])


def board_token(task: Task, config_json: str) -> str:
    """The token every worker of this run derives alike (the run identity's tail)."""
    return run_identity(task.cluster, config_json)[-16:]


def reporter_to_chief(task: Task, config_json: str) -> StatusReporter | None:
    """A non-chief's started reporter to the chief's board (None when it cannot open a socket)."""
    try:
        return StatusReporter(board_address(task), board_token(task, config_json), task.index).start()
    except (OSError, ValueError):
        return None


@dataclass
class Peer:
    """A worker as the chief sees it (stalls.Watched): its end is not the chief's to see; its
    ``/proc`` is readable only for the chief itself."""

    index: int
    host: str | None
    pid: int | None = None

    def exit_code(self) -> int | None:
        return None

    def local_pid(self) -> int | None:
        return self.pid


class ChiefWatch:
    """The board, the chief's own reporter and the watch thread; fed the run's events by
    :class:`WatchedEvents`."""

    def __init__(self, task: Task, config_json: str, events: WatchedEvents, paused: Callable[[], bool]):
        _, port = board_address(task)
        self.board = StatusBoard("0.0.0.0", port, board_token(task, config_json))
        peers = [Peer(i, None if i == task.index else split_host(a)[0], os.getpid() if i == task.index else None)
                 for i, a in enumerate(task.cluster["worker"])]
        self.stalls = StallWatch(self.board, peers)
        # The chief reports to its own board like the others (its stack, its phase), over loopback.
        self.reporter = StatusReporter(("127.0.0.1", port), self.board.token, task.index).start()
        self._events, self._paused = events, paused
        self._lock = threading.Lock()  # the training thread's steps and the watch thread's check
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="stall-watch", daemon=True)
        events.watch = self
        self._thread.start()

    def seen(self, event: Event) -> Event | None:
        """An event the chief wrote: its steps feed the watch; the ``stall_cleared`` to write, if any."""
        if isinstance(event, RunStarted):
            self.stalls.total_steps = event.total_steps
        elif isinstance(event, Step):
            with self._lock:
                return self.stalls.on_step(event.step)
        return None

    def context(self) -> str:
        """The stall now, for the chief's error when TensorFlow's heartbeat check ends the cluster."""
        with self._lock:
            return self.stalls.context()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self.reporter.close()
        self.board.close()

    def _loop(self) -> None:
        while not self._stop.wait(CHECK_S):
            with self._lock:
                stall = self.stalls.check(paused=self._paused())
            if stall is not None:
                self._events.emit(stall)


class WatchedEvents(EventWriter):
    """The scheduler-run chief's event writer: one writer for two threads (the training thread's
    events, the watch thread's stall), and every event shown to the watch as the launcher
    shows it the chief's relayed events."""

    def __init__(self, mode: str = "text", stream: TextIO | None = None):
        super().__init__(mode, stream)
        self._emitting = threading.RLock()  # re-entered: a step's emit writes the stall_cleared it ends
        self.watch: ChiefWatch | None = None

    def emit(self, event: Event, durable: bool = True) -> None:
        with self._emitting:
            super().emit(event, durable)
            follow = self.watch.seen(event) if self.watch is not None else None
            if follow is not None:
                super().emit(follow)

    def sync(self) -> None:
        with self._emitting:
            super().sync()

    def close(self) -> None:
        with self._emitting:
            super().close()
