"""The event stream of a run: every event is appended to the run's ``events.jsonl`` (flushed
as it happens, fsynced at checkpoints and at the end: the durable copy) and written to stdout as
a JSON line or a readable line. Both copies hold the same lines: step lines in protocol 3's lean
form (gui_app/core/event_lines.py).

stdout carries nothing but events in ``jsonl`` mode; everything else goes to stderr.

The engine must outlive its supervisor (docs/architecture.md, "Process model"): a failed write to stdout (the
window was killed, its pipe is gone) switches the stream off, keeps writing the run directory,
and calls ``on_stdout_lost`` so the run stops with a checkpoint instead of dying on the next
print.
"""
from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable, TextIO

from gui_app.core.config import MULTI_WORKER
from gui_app.core.event_lines import LINES_ENV, LineEncoder
from gui_app.core.events import (
    Checkpoint,
    Continued,
    EpochEnd,
    Error,
    Eval,
    Event,
    Paused,
    Progress,
    RunFinished,
    RunStarted,
    Stall,
    StallCleared,
    Step,
    Warning,
)
from gui_app.core.events_file import EventsFile
from gui_app.core.finding_rules import stall_sentence
from gui_app.core.history.replicas import replica_label
from gui_app.core.rundir import EVENTS_FILE, SUMMARY_FILE
from gui_app.core.wording import count, example_counts, strategy_text
from gui_app.engine.run.records import RunRecords


class EventWriter:
    def __init__(self, mode: str = "text", stream: TextIO | None = None):
        if mode not in ("jsonl", "text", "none"):
            raise ValueError(f"--events: must be jsonl, text or none; got {mode!r}")
        self.mode = mode
        self.stream = stream or sys.stdout
        self._file: EventsFile | None = None
        self._records: RunRecords | None = None  # the pyramid and summary.json beside the events
        self._pending: list[tuple[Event, dict[str, Any]]] = []  # events emitted before the run directory exists
        self.stdout_lost = False
        self._announced = False  # a run_started was written: the run's end is news on stdout
        self.on_stdout_lost: Callable[[], None] | None = None
        # Protocol 3's lean step lines (gui_app/core/event_lines.py); the variable is the
        # benchmarks' switch to protocol 2's long ones.
        self._lines = LineEncoder(os.environ.get(LINES_ENV) or "lean")

    def attach(self, run_dir: str | Path) -> None:
        """Start appending to ``run_dir/events.jsonl`` (and write what came before); a torn last
        line left by a killed process is cut off first (gui_app/core/events_file.py)."""
        self._file = EventsFile(Path(run_dir) / EVENTS_FILE)
        self._records = RunRecords(run_dir, self._file.inode())
        pending, self._pending = self._pending, []
        for event, data in pending:
            self._append(event, data)

    def sync(self) -> None:
        """Make every event so far durable (at checkpoints and at the end of the run)."""
        if self._file:
            self._file.sync()
        if self._records:
            self._records.flush()

    def close(self) -> None:
        if self._records:
            self._records.close()
            self._records = None
        if self._file:
            self._file.close()
            self._file = None

    def progress(self, report: dict[str, Any]) -> None:
        """A reader's report as a ``progress`` event: the ``core.datasets.base.ProgressCallback`` of a run."""
        self.emit(Progress(**report))

    def emit_final(self, event: Event, durable: bool = True) -> None:
        """``emit`` for the error path: never raises (the disk may be full, stderr dead)."""
        try:
            self.emit(event, durable)
            self.sync()
        except Exception:  # noqa: BLE001 - nothing is left to tell; the exit code still says it
            pass

    def emit(self, event: Event, durable: bool = True) -> None:
        """Write one typed event (gui_app.core.events); ``durable=False`` keeps it out of
        events.jsonl (stdout only)."""
        if not event.time:
            event.time = round(time.time(), 3)
        data = self._lines.encode(event)
        if isinstance(event, RunStarted) and event.resumed and durable and self._file:
            self._keep_history_until(self._file, event.start_step)
        if durable:
            self._append(event, data)
        if self.mode == "jsonl":
            self._write_stream(json.dumps(data, separators=(",", ":")) + "\n")
        elif self.mode == "text":
            self._announced |= isinstance(event, RunStarted)
            # A run refused before it started is the stderr line alone (README: one line).
            refused = isinstance(event, RunFinished) and event.status == "failed" and not self._announced
            line = None if refused else format_text(event)
            if line:
                self._write_stream(line + "\n")

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

    def _append(self, event: Event, data: dict[str, Any]) -> None:
        """One event into events.jsonl, or kept for it until the run directory exists."""
        if self._file is None:
            self._pending.append((event, data))
            return
        start, end = self._file.append((json.dumps(data, separators=(",", ":")) + "\n").encode("utf-8"))
        if self._records is not None:
            self._records.add(event, start, end)

    def _keep_history_until(self, file: EventsFile, step: int) -> None:
        """A resumed run goes on from its checkpoint: the history after it is dropped from the
        file before the run says it started (docs/events.md, "The events file")."""
        try:
            file.keep_history_until(step)
        except OSError as exc:  # the old file stays whole; readers keep the last of each step
            self.emit(Warning(message=f"{file.path}: cannot drop the steps after {step} that the resumed "
                                      f"run writes again ({exc.strerror or exc}); it may hold them twice"))
            return
        # The run list's cache of the old file goes too: its key, the file's inode, may be reused.
        with contextlib.suppress(OSError):
            (file.path.parent / SUMMARY_FILE).unlink(missing_ok=True)
        if self._records is not None:
            self._records.replaced(file.inode())


def _num(v: Any, fmt: str = ".4f") -> str:
    return "n/a" if v is None else format(v, fmt)


def _replicas(event: RunStarted) -> str:
    """``CPU:0``, or ``0/CPU:0, 1/CPU:0`` when several workers each have a CPU:0."""
    return ", ".join(replica_label(r.device or "", r.worker if event.num_workers > 1 else None)
                     for r in event.replicas)


def format_text(event: Event) -> str | None:
    """A readable line for ``--events text``; step events are shown every 10th step."""
    match event:
        case RunStarted(dataset=d, model=model):
            counts = example_counts(d)
            return (f"{'Resuming' if event.resumed else 'Training'} {model.get('name')} on {d.get('name')}"
                    f"{f' ({counts})' if counts else ''} with {_strategy(event)}; {event.total_steps:,} steps, "
                    f"run directory {event.run_dir}")
        case Step():
            if event.step % 10:
                return None
            per = " ".join(f"r{r.replica}:{_num(r.loss, '.3f')}" for r in event.replicas)
            return (f"epoch {event.epoch} step {event.step}: loss {_num(event.loss)} acc {_num(event.accuracy)} "
                    f"{_num(event.examples_per_sec, '.0f')} ex/s  [replica loss {per}]")
        case EpochEnd():
            return (f"epoch {event.epoch} done in {_num(event.duration, '.1f')}s: loss {_num(event.loss)} "
                    f"acc {_num(event.accuracy)} val_loss {_num(event.val_loss)} val_acc {_num(event.val_accuracy)}")
        case Eval():
            return (f"test: loss {_num(event.loss)} accuracy {_num(event.accuracy)} on {event.examples} examples "
                    f"(per replica {event.examples_per_replica})")
        case Checkpoint():
            return f"checkpoint at step {event.step}: {event.path}"
        case Progress():
            total = f"/{_num(event.total, 'g')}" if event.total else ""
            return f"{event.stage} {event.what or ''}: {_num(event.done, 'g')}{total}"
        case Warning():
            return f"{event.TYPE}: {event.message}"
        case Error():
            return None  # the one line on stderr says it (engine/commands/train.py)
        case Paused() | Continued():
            return f"{event.TYPE} at step {event.step}"
        case Stall():
            return f"stalled: {stall_sentence(event)}"
        case StallCleared():
            return f"stall cleared at step {event.step} after {event.seconds:.0f} s"
        case RunFinished():
            # A failure's reason is the stderr line; saying it here too printed it three times.
            message = f": {event.message}" if event.message and event.status != "failed" else ""
            where = f" ({event.run_dir})" if event.run_dir else ""
            return f"run {event.status} at step {event.step}{message}{where}"
    return None


def _strategy(event: RunStarted) -> str:
    """``mirrored, 2 replicas (CPU:0, CPU:1)``; a cluster with its replicas in all."""
    config = event.config.get("strategy") or {}
    name = (event.strategy or {}).get("name") or config.get("name") or "default"
    devices = [replica_label(r.device or "", None) for r in event.replicas]
    text = strategy_text(name, devices=devices, workers=event.num_workers or 0, ps=config.get("ps") or 0,
                         cluster=config.get("cluster"), device=config.get("device"))
    return f"{text} ({count(event.num_replicas, 'replica')}: {_replicas(event)})" if name in MULTI_WORKER else text
