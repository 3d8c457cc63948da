"""Helpers for running the engine in-process and as a subprocess (imported by the engine tests)."""
from __future__ import annotations

import io
import json
import os
import subprocess
import time
from pathlib import Path

from reference_run import REFERENCE

from gui_app.identity import app_command, app_env


def config_dict(**sections) -> dict:
    data = json.loads(json.dumps(REFERENCE))
    for name, values in sections.items():
        data.setdefault(name, {}).update(values)
    return data


class EventTap(io.StringIO):
    """An events stream that parses every JSON line and may act on it (e.g. send ``stop``)."""

    def __init__(self, on_event=None):
        super().__init__()
        self.events: list[dict] = []
        self.on_event = on_event

    def write(self, text: str) -> int:
        for line in text.splitlines():
            if line.strip():
                event = json.loads(line)
                self.events.append(event)
                if self.on_event:
                    self.on_event(event)
        return len(text)

    def of(self, kind: str) -> list[dict]:
        return [e for e in self.events if e["type"] == kind]


def run_in_process(command: str, target: str, runs_dir: Path | None = None, on_event=None, control=None):
    """Run ``train``/``resume``/``evaluate`` in this process; returns (exit code, EventTap)."""
    from gui_app.engine.commands.cli import build_parser
    from gui_app.engine.commands.train import run_command
    from gui_app.engine.run.control import Control

    argv = [command, str(target), "--events", "jsonl"]
    if runs_dir is not None:
        argv += ["--runs-dir", str(runs_dir)]
    args = build_parser().parse_args(argv)
    tap = EventTap(on_event)
    control = control or Control()
    code = run_command(args, control=control, stream=tap)
    return code, tap


def run_cli(*args: str, stdin: str | None = None, timeout: float = 300, env: dict | None = None):
    """The engine as the GUI runs it: a subprocess; returns CompletedProcess (text)."""
    return subprocess.run(app_command(*args), input=stdin, capture_output=True, text=True, timeout=timeout,
                          env=app_env(env), cwd=os.getcwd())


def parse_jsonl(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines()]


class LineReader:
    """Reads a subprocess's stdout lines on a thread so every wait has a timeout (a hung engine
    fails its test instead of hanging the suite)."""

    def __init__(self, stream):
        import queue
        import threading

        self._lines: "queue.Queue[str | None]" = queue.Queue()
        self._stream = stream

        def pump():
            try:
                for line in stream:
                    self._lines.put(line)
            except (OSError, ValueError):
                pass
            self._lines.put(None)

        self._thread = threading.Thread(target=pump, daemon=True)
        self._thread.start()

    def events(self, timeout: float = 120):
        """Yield parsed JSON events until end of stream; AssertionError when one takes longer."""
        import queue
        import time

        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no line from the engine within {timeout} s") from None
            if line is None:
                return
            if line.strip():
                yield json.loads(line)


def start_engine(*args: str, stdin=True):
    """``replica-studio ARGS`` as the window starts it, stdout and stdin pipes; (proc, reader)."""
    proc = subprocess.Popen(app_command(*args), stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=app_env())
    return proc, LineReader(proc.stdout)


def until(condition, timeout: float, what: str):
    """``condition()``'s first true value, polled; AssertionError naming ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"waited {timeout} s for: {what}")
