"""The event stream of a run: every event is appended to the run's ``events.jsonl`` (flushed
as it happens, fsynced at checkpoints and at the end: the durable copy) and written to stdout as
a JSON line or a readable line.

stdout carries nothing but events in ``jsonl`` mode; everything else goes to stderr.

The engine must outlive its supervisor (docs/architecture.md, "Process model"): a failed write to stdout (the
window was killed, its pipe is gone) switches the stream off, keeps writing the run directory,
and calls ``on_stdout_lost`` so the run stops with a checkpoint instead of dying on the next
print.
"""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable, TextIO

from gui_app.core.events import Event, encode
from gui_app.core.rundir import EVENTS_FILE


class EventWriter:
    def __init__(self, mode: str = "text", stream: TextIO | None = None):
        if mode not in ("jsonl", "text", "none"):
            raise ValueError(f"--events: must be jsonl, text or none; got {mode!r}")
        self.mode = mode
        self.stream = stream or sys.stdout
        self._file: TextIO | None = None
        self._pending: list[dict] = []  # events emitted before the run directory exists
        self.stdout_lost = False
        self.on_stdout_lost: Callable[[], None] | None = None

    def attach(self, run_dir: str | Path) -> None:
        """Start appending to ``run_dir/events.jsonl`` (and write what came before).

        A process killed mid-write leaves a torn last line; appending onto it would glue our
        first event (the resumed ``run_started``) to the fragment and lose both."""
        path = Path(run_dir) / EVENTS_FILE
        torn = False
        try:
            with open(path, "rb") as f:
                f.seek(0, os.SEEK_END)
                if f.tell():
                    f.seek(-1, os.SEEK_END)
                    torn = f.read(1) != b"\n"
        except FileNotFoundError:
            pass
        self._file = open(path, "a", encoding="utf-8")
        if torn:
            self._file.write("\n")
        for event in self._pending:
            self._write_file(event)
        self._pending.clear()

    def sync(self) -> None:
        """Make every event so far durable (at checkpoints and at the end of the run)."""
        if self._file:
            self._file.flush()
            os.fsync(self._file.fileno())

    def close(self) -> None:
        if self._file:
            try:
                self._file.close()
            except OSError:  # a full disk: the flush of the last bytes failed; nothing to add
                pass
            self._file = None

    def emit_final(self, event: Event, durable: bool = True) -> None:
        """``emit`` for the error path: never raises (the disk may be full, stderr dead)."""
        try:
            self.emit(event, durable)
            self.sync()
        except Exception:  # noqa: BLE001 - nothing is left to tell; the exit code still says it
            pass

    def emit(self, event: Event, durable: bool = True) -> dict:
        """Write one typed event (gui_app.core.events) and return its JSON object; ``durable=False``
        keeps it out of events.jsonl (stdout only)."""
        if not event.time:
            event.time = round(time.time(), 3)
        data = encode(event)
        if not durable:
            pass
        elif self._file:
            self._write_file(data)
        else:
            self._pending.append(data)
        if self.mode == "jsonl":
            self._write_stream(json.dumps(data, separators=(",", ":")) + "\n")
        elif self.mode == "text":
            line = format_text(data)
            if line:
                self._write_stream(line + "\n")
        return data

    def _write_stream(self, text: str) -> None:
        if self.stdout_lost:
            return
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # BrokenPipeError, EIO, or a closed stream
            self._lose_stdout()

    def _lose_stdout(self) -> None:
        self.stdout_lost = True
        if self.stream is sys.stdout:
            # Python flushes sys.stdout again at exit and would print "Exception ignored ...
            # BrokenPipeError" and exit 120: point fd 1 at /dev/null instead.
            try:
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, sys.stdout.fileno())
                os.close(devnull)
            except (OSError, ValueError):
                pass
        if self.on_stdout_lost is not None:
            self.on_stdout_lost()

    def _write_file(self, event: dict) -> None:
        self._file.write(json.dumps(event, separators=(",", ":")) + "\n")
        self._file.flush()


def _num(v: Any, fmt: str = ".4f") -> str:
    return "n/a" if v is None else format(v, fmt)


def format_text(e: dict) -> str | None:
    """A readable line for ``--events text``; step events are shown every 10th step."""
    t = e["type"]
    if t == "run_started":
        d = e["dataset"]
        return (f"{'Resuming' if e['resumed'] else 'Training'} {e['model']['name']} on {d['name']} "
                f"({d['train_examples']} train / {d['test_examples']} test) with {e['strategy']['name']} over "
                f"{e['num_replicas']} replica(s): "
                f"{', '.join(r['device'].split('device:')[-1] for r in e['replicas'])}; "
                f"{e['total_steps']} steps, run directory {e['run_dir']}")
    if t == "step":
        if e["step"] % 10:
            return None
        per = " ".join(f"r{r['replica']}:{_num(r['loss'], '.3f')}" for r in e["replicas"])
        return (f"epoch {e['epoch']} step {e['step']}: loss {_num(e['loss'])} acc {_num(e['accuracy'])} "
                f"{_num(e['examples_per_sec'], '.0f')} ex/s  [replica loss {per}]")
    if t == "epoch_end":
        return (f"epoch {e['epoch']} done in {e['duration']:.1f}s: loss {_num(e['loss'])} acc {_num(e['accuracy'])} "
                f"val_loss {_num(e['val_loss'])} val_acc {_num(e['val_accuracy'])}")
    if t == "eval":
        return (f"test: loss {_num(e['loss'])} accuracy {_num(e['accuracy'])} on {e['examples']} examples "
                f"(per replica {e['examples_per_replica']})")
    if t == "checkpoint":
        return f"checkpoint at step {e['step']}: {e['path']}"
    if t == "progress":
        total = f"/{e['total']}" if e.get("total") else ""
        return f"{e['stage']} {e.get('what', '')}: {e['done']}{total}"
    if t in ("warning", "error"):
        return f"{t}: {e['message']}"
    if t in ("paused", "continued"):
        return f"{t} at step {e['step']}"
    if t == "run_finished":
        msg = f": {e['message']}" if e.get("message") else ""
        return f"run {e['status']} at step {e['step']}{msg} ({e['run_dir']})"
    return None
