"""Run the launcher (``train``/``resume`` of a multi-worker config) as the window does: one
process whose stdout carries the events; find and kill its worker processes."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

from gui_app.identity import app_command, app_env

# Where a running worker waits while another is frozen: in a step's collectives, or in the
# validation pass's when the freeze came at an epoch's end.
WAITING_PHASES = ("training", "agreeing", "evaluating")


def children(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            out += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            pass
    return out


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead for our purpose
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


class Launched:
    """The launcher process; ``on_event(self, event)`` may act (e.g. kill a worker)."""

    def __init__(self, *args: str, on_event=None, env: dict | None = None):
        self.proc = subprocess.Popen(app_command(*args, "--events", "jsonl"), stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
                                     env=app_env({"TF_CPP_MIN_LOG_LEVEL": "2", **(env or {})}))
        self.events: list[dict] = []
        self.stderr = ""
        self.worker_pids: set[int] = set()
        self.on_event = on_event
        self._err = threading.Thread(target=self._read_err, daemon=True)
        self._err.start()

    def _read_err(self):
        self.stderr = self.proc.stderr.read()

    def wait(self, timeout: float = 240) -> int:
        deadline = time.monotonic() + timeout
        for line in self.proc.stdout:
            event = json.loads(line)
            self.events.append(event)
            self.worker_pids.update(children(self.proc.pid))
            if self.on_event:
                self.on_event(self, event)
            if time.monotonic() > deadline:
                self.kill()
                raise TimeoutError(f"the launcher ran longer than {timeout} s")
        code = self.proc.wait(timeout=max(1, deadline - time.monotonic()))
        self._err.join(timeout=5)
        return code

    def kill(self) -> None:
        """The launcher and its workers: a worker left running would slow every later test."""
        for pid in [*children(self.proc.pid), self.proc.pid]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait(timeout=30)

    def of(self, kind: str) -> list[dict]:
        return [e for e in self.events if e["type"] == kind]

    def digests(self) -> dict[str, str]:
        """worker -> the weights digest it printed at its end."""
        out = {}
        for line in self.stderr.splitlines():
            if "] weights sha256 " in line:
                out[line.split("]")[0].strip("[")] = line.split("weights sha256 ")[1].split()[0]
        return out
