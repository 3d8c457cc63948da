"""The processes of a local cluster (the workers, the parameter servers): started so that they
die with us, their logs forwarded with a prefix, what their last lines say (the error, the
peers TensorFlow found hung), and ended together."""
from __future__ import annotations

import re
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from typing import IO, Iterable

from gui_app.core.ssh import SSH_FAILED
from gui_app.identity import app_env


def die_with_parent() -> None:  # runs in the child between fork and exec
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


@dataclass
class WorkerProcess:
    """A started worker or ps process of this machine's cluster, and what its log told."""

    index: int
    address: str
    proc: subprocess.Popen[str]
    last_error: str | None = None  # its last "replica-studio worker: ..." line
    unhealthy: list[int] = field(default_factory=list)  # peers TensorFlow reported as not sending heartbeats
    threads: list[threading.Thread] = field(default_factory=list)  # the readers of its output
    host: str | None = None  # the SSH host it runs on (proc is the ssh client: its exit is the shell's there)

    @property
    def where(self) -> str:
        return f"on {self.host} ({self.address})" if self.host else f"at {self.address}"

    def exit_code(self) -> int | None:
        """The stall watch's view (stalls.Watched): for a worker on a host, its ssh client's."""
        return self.proc.poll()

    def local_pid(self) -> int | None:
        return self.proc.pid if self.host is None else None

    @property
    def killed(self) -> bool:
        """Ended by a signal (or, over ssh, its connection lost): a cause, not a peer's victim."""
        rc = self.proc.returncode
        return rc is not None and (rc < 0 or (self.host is not None and rc > 128))

    def how_it_ended(self) -> str:
        rc = self.proc.returncode
        if self.host is not None and rc == SSH_FAILED:
            return "lost its ssh connection (ssh exit 255)"
        if self.host is not None and rc is not None and rc > 128:  # the shell there: 128 + the signal
            rc = 128 - rc
        if rc is not None and rc == -getattr(signal, "SIGALRM", 0):  # the worker's join alarm (topology.arm_join_alarm)
            return ("did not form the cluster within strategy.join_timeout_s (the ports answer, but not every "
                    "task joined TensorFlow's cluster: is a replica-studio worker listening on each of them?)")
        if rc is not None and rc < 0:
            try:
                return f"was killed by {signal.Signals(-rc).name}"
            except ValueError:
                return f"was killed by signal {-rc}"
        return f"exited with code {rc}"


def start_process(index: int, address: str, cmd: list[str], env: dict[str, str] | None = None,
                  stdin: int = subprocess.DEVNULL, stdout: int = subprocess.DEVNULL,
                  host: str | None = None) -> WorkerProcess:
    """Start ``cmd`` (an app command) with ``env`` added to ours; its stderr is forwarded to
    ours by a thread of its own (:func:`_pump_stderr`). On Linux it dies with this process."""
    proc = subprocess.Popen(cmd, stdin=stdin, stdout=stdout, stderr=subprocess.PIPE, text=True, bufsize=1,
                            env=app_env(env), preexec_fn=die_with_parent if sys.platform == "linux" else None)
    process = WorkerProcess(index, address, proc, host=host)
    reader = threading.Thread(target=_pump_stderr, args=(process, proc.stderr), daemon=True)
    process.threads.append(reader)
    reader.start()
    return process


def kill_all(processes: Iterable[WorkerProcess]) -> None:
    """Kill every process still running, then wait for each to be gone (at most 10 s each)."""
    processes = list(processes)
    for p in processes:
        if p.proc.poll() is None:
            p.proc.kill()
    for p in processes:
        try:
            p.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass


_UNHEALTHY = "stopped sending heartbeats"
_TASK = re.compile(r"/job:worker/(?:replica:0/)?task:(\d+)")


def _pump_stderr(process: WorkerProcess, stream: IO[str]) -> None:
    """Forward a process's log to ours, prefixed; keep its last error and, from TensorFlow's
    coordination service ("The following tasks are unhealthy (stopped sending heartbeats):"
    and then one task per line), which peers hung."""
    prefix = f"[worker {process.index}] "
    listing = False
    for line in stream:
        if _UNHEALTHY in line:
            listing = True
        elif listing:
            found = _TASK.fullmatch(line.strip())
            if found and int(found.group(1)) not in process.unhealthy:
                process.unhealthy.append(int(found.group(1)))
            listing = bool(found)
        if line.startswith("replica-studio worker: "):
            process.last_error = line.strip()[len("replica-studio worker: "):]
        sys.stderr.write(prefix + line)
    sys.stderr.flush()
