"""A worker's status reports to the chief's side of a cluster (the launcher, or in a cluster a
scheduler runs the chief worker itself: engine/cluster/chief_watch.py): its phase, the last
step it finished and, once it has been in one phase for a while, the top of its Python stack.
The stall watch (engine/cluster/stalls.py) reads them to tell "the cluster is
waiting for worker 1, which is stopped" from "the cluster is slow" (docs/diagnose.md).

Out of band and cheap: a daemon thread sends one UDP datagram of a few hundred bytes every
:data:`REPORT_S` to the address the launcher gave (``--status-to HOST:PORT:TOKEN``), the same for
a worker here and one on an SSH host (the chief's address, which the workers reach for gRPC
anyway). The training thread does nothing for it but store the last step in an action
(:class:`StepSeen`): the phase is read from the training thread's own stack
(``sys._current_frames()``), which names what the run controller is in -- a step group, a
checkpoint, the validation -- at no cost to the steps. TensorFlow releases the GIL while a step
group runs, so the thread reports while the worker waits in a collective; a worker frozen by
SIGSTOP (or stuck holding the GIL) stops reporting, which is itself what the chief notices.
"""
from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time
import traceback

from gui_app.engine.training.actions.base import Action, StepGroup

REPORT_S = 0.5  # how often a report is sent
STACK_AFTER_S = 1.0  # in one phase this long: the stack goes with the report (a stall is 2 s at least)
STACK_FRAMES = 3  # the innermost frames (where it is: often TensorFlow's)
OUR_FRAMES = 5  # and the innermost of ours (what of the run it is in)
# What the run controller is in, by the innermost function of ours on the training thread's
# stack that names one (file name, function name) -> phase; the first match from the inside wins.
PHASES = (
    (("checkpoints.py", None), "checkpointing"),
    (("controller.py", "_end_epoch"), "evaluating"),
    (("final_evaluation.py", None), "evaluating"),
    (("controller.py", "_pause_if_asked"), "paused"),
    (("agreement.py", None), "agreeing"),
    (("loop.py", "train"), "training"),
    (("ps_loop.py", "train"), "training"),
    (("controller.py", "run"), "saving the model"),
    (("controller.py", "train"), "between steps"),
)


def phase_of(frame) -> str:
    """The phase the stack ending in ``frame`` (innermost) is in; ``starting`` before training."""
    while frame is not None:  # innermost first
        path, function = frame.f_code.co_filename, frame.f_code.co_name
        if "gui_app" in path:  # only our files: TensorFlow and Keras have a loop.py and a train too
            name = os.path.basename(path)
            for (file, func), phase in PHASES:
                if name == file and (func is None or func == function):
                    return phase
        frame = frame.f_back
    return "starting"


def stack_lines(frame) -> list[str]:
    """The top of the stack, outermost first, as ``file:line function``: the innermost
    :data:`OUR_FRAMES` frames of ours and the innermost :data:`STACK_FRAMES` of any code."""
    summary = traceback.extract_stack(frame)
    ours = [i for i, f in enumerate(summary) if "gui_app" in f.filename][-OUR_FRAMES:]
    keep = sorted(set(ours) | set(range(max(0, len(summary) - STACK_FRAMES), len(summary))))
    return [f"{os.path.basename(summary[i].filename)}:{summary[i].lineno} {summary[i].name}" for i in keep]


class StatusReporter:
    """The daemon thread of one worker that reports to ``address`` (host, port) with ``token``."""

    def __init__(self, address: tuple[str, int], token: str, worker: int, interval: float = REPORT_S):
        self.address, self.token, self.worker, self.interval = address, token, worker, interval
        self.last_step = 0
        self.sent = 0
        self._main = threading.main_thread().ident
        self._phase, self._since = "starting", time.monotonic()
        self._stop = threading.Event()
        self._socket = socket.socket(socket.AF_INET6 if ":" in address[0] else socket.AF_INET, socket.SOCK_DGRAM)
        self._thread = threading.Thread(target=self._loop, name="status-reports", daemon=True)

    def start(self) -> StatusReporter:
        self._thread.start()
        return self

    def close(self) -> None:
        self._stop.set()
        if self._thread.ident is not None:  # started
            self._thread.join(timeout=2)
        self._socket.close()

    def report(self) -> dict:
        """This worker's report now (what one datagram carries)."""
        frame = sys._current_frames().get(self._main) if self._main is not None else None
        phase = phase_of(frame) if frame is not None else "finishing"
        now = time.monotonic()
        if phase != self._phase:
            self._phase, self._since = phase, now
        held = now - self._since
        out = {"token": self.token, "worker": self.worker, "pid": os.getpid(), "host": socket.gethostname(),
               "phase": phase, "last_step": self.last_step, "phase_seconds": round(held, 2)}
        if held >= STACK_AFTER_S and frame is not None:
            out["stack"] = stack_lines(frame)
        return out

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self._socket.sendto(json.dumps(self.report()).encode(), self.address)
                self.sent += 1
            except OSError:
                pass  # the launcher went away or the network is down: the next report tries again


class StepSeen(Action):
    """Keeps the reporter's last finished step (the controller's actions see every group)."""

    def __init__(self, reporter: StatusReporter):
        self.reporter = reporter

    def on_steps(self, group: StepGroup) -> None:
        self.reporter.last_step = group.last_step

    def close(self) -> None:
        self.reporter.close()


def parse_address(value: str) -> tuple[tuple[str, int], str]:
    """``HOST:PORT:TOKEN`` (an IPv6 host in brackets) -> ((host, port), token); ValueError when bad."""
    rest, _, token = value.rpartition(":")
    host, _, port = rest.rpartition(":")
    host = host.strip("[]")
    if not host or not port.isdigit() or not token:
        raise ValueError(f"--status-to: {value!r} is not HOST:PORT:TOKEN")
    return (host, int(port)), token


def reporter_from(value: str | None, worker: int) -> StatusReporter | None:
    """The started reporter of ``--status-to`` (None without it, or when it cannot open a socket)."""
    if not value:
        return None
    address, token = parse_address(value)
    try:
        return StatusReporter(address, token, worker).start()
    except OSError:
        return None
