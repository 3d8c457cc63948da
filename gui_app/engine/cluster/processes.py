"""The processes of a local cluster: started so that they die with us, their logs forwarded
with a prefix, and what their last lines say (the error, the peers TensorFlow found hung)."""
from __future__ import annotations

import re
import signal
import subprocess
import sys
from dataclasses import dataclass, field


def die_with_parent() -> None:  # runs in the child between fork and exec
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


@dataclass
class Worker:
    index: int
    address: str
    proc: subprocess.Popen
    last_error: str | None = None  # its last "replica-studio worker: ..." line
    unhealthy: list = field(default_factory=list)  # peers TensorFlow reported as not sending heartbeats
    threads: list = field(default_factory=list)

    def how_it_ended(self) -> str:
        rc = self.proc.returncode
        if rc is not None and rc == -getattr(signal, "SIGALRM", 0):  # worker_command's join alarm
            return ("did not form the cluster within strategy.join_timeout_s (the ports answer, but not every "
                    "task joined TensorFlow's cluster: is a replica-studio worker listening on each of them?)")
        if rc is not None and rc < 0:
            try:
                return f"was killed by {signal.Signals(-rc).name}"
            except ValueError:
                return f"was killed by signal {-rc}"
        return f"exited with code {rc}"


_UNHEALTHY = "stopped sending heartbeats"
_TASK = re.compile(r"/job:worker/(?:replica:0/)?task:(\d+)")


def pump_stderr(worker: Worker) -> None:
    """Forward a worker's log to ours, prefixed; keep its last error and, from TensorFlow's
    coordination service ("The following tasks are unhealthy (stopped sending heartbeats):"
    and then one task per line), which peers hung."""
    prefix = f"[worker {worker.index}] "
    listing = False
    for line in worker.proc.stderr:
        if _UNHEALTHY in line:
            listing = True
        elif listing:
            found = _TASK.fullmatch(line.strip())
            if found and int(found.group(1)) not in worker.unhealthy:
                worker.unhealthy.append(int(found.group(1)))
            listing = bool(found)
        if line.startswith("replica-studio worker: "):
            worker.last_error = line.strip()[len("replica-studio worker: "):]
        sys.stderr.write(prefix + line)
    sys.stderr.flush()
