"""The parts of an :class:`~gui_app.ui.workers.attachment.Attachment`: what it reads on a
Background thread (a long run's history line folded, a resumed run's start line, whether a run
whose ``attach`` ended is over), :class:`InOrder`, which keeps what the window is told in the
order it came while one of those reads is under way, the :class:`Backoff` of its
re-attachments, and :func:`kill_here`."""
from __future__ import annotations

import os
import signal
import socket
import time
from pathlib import Path
from typing import Any, Callable

from gui_app.core.backends import HereBackend, RunBackend
from gui_app.core.events_follow import last_start
from gui_app.core.history.coarse import long_history
from gui_app.core.history.wire import decode_history
from gui_app.core.line_follow import count_lines
from gui_app.core.live_runs import live_process
from gui_app.core.run_summary import summarize_events
from gui_app.core.rundir import EVENTS_FILE
from gui_app.ui.workers.background import Send

# the kinds of what the window is told
EVENT, HISTORY, LOG, END = "event", "history", "log", "end"
_PENDING = "pending"  # a place in line for what a thread has not delivered yet
BACKOFF_FIRST_S, BACKOFF_MAX_S = 0.5, 10.0
HISTORY_UNREADABLE = "the run's history could not be read ({}): the charts show its last steps only"


class InOrder:
    """What the window is told, in order: once a place is taken for what a thread will deliver
    (:meth:`later`), what comes after it waits until it is filled."""

    def __init__(self, tell: Callable[[str, Any], None]) -> None:
        self._tell = tell
        self._held: list[list[Any]] = []  # [kind, value]s

    def __bool__(self) -> bool:
        return bool(self._held)

    def later(self) -> Callable[[tuple[str, Any]], None]:
        """Take a place in line; call what this returns with ``(kind, value)`` to fill it."""
        item: list[Any] = [_PENDING, None]
        self._held.append(item)

        def fill(result: tuple[str, Any]) -> None:
            item[:] = result
            self._release()
        return fill

    def out(self, kind: str, value: Any) -> None:
        """Tell the window now, or after the places taken before it are filled."""
        if self._held:
            self._held.append([kind, value])
        else:
            self._tell(kind, value)

    def end_later(self, value: Any) -> None:
        """The end, after everything held (once)."""
        if not any(kind == END for kind, _ in self._held):
            self._held.append([END, value])

    def clear(self) -> None:
        self._held.clear()

    def _release(self) -> None:
        while self._held and self._held[0][0] != _PENDING:
            kind, value = self._held.pop(0)
            self._tell(kind, value)  # may clear what is held (the end, a detach)


def fold_history(send: Send, value: dict) -> None:
    """A ``history`` line folded as Open folds a long run's pyramid."""
    try:
        head = decode_history(value)
    except ValueError as exc:
        send((LOG, HISTORY_UNREADABLE.format(exc)))
        return
    send((HISTORY, long_history(head.view, head.started, head.first_started)))


def start_line(send: Send, run_dir: str, scheduled: bool) -> None:
    """The line a resumed run's attach starts at, and the byte it may start from instead (0: none;
    see ``Attachment._on_started``): a scheduled run's after every line, one here at its last
    run_started, by its byte (skipping a million lines took ``attach`` 9 s of a 5.5 GB file)."""
    send((count_lines(Path(run_dir) / EVENTS_FILE), 0) if scheduled else last_start(run_dir))


def run_check(send: Send, run_dir: str, backend: RunBackend | None, stopping: bool) -> None:
    """Once ``attach`` said the run's process is gone: sends None when the run may still go on (a
    process holds its lock, or its scheduler's job is active), else ``(ending, finished)``: what
    its scheduler says of the end (None: nothing; see ``Attachment._gone``), and the status and
    message of the run_finished its events end with (None: they end without one)."""
    here = backend if isinstance(backend, HereBackend) else None
    if live_process(run_dir) is not None or (here is not None and here.job_active()):
        send(None)
        return
    finished = None
    if here is not None:
        try:
            status = summarize_events(run_dir)  # from summary.json's offset: only the lines after it are read
        except OSError:
            status = None
        if status is not None and status.status not in ("new", "interrupted"):
            finished = (status.status, status.message or "")
    send((here.ending(stopping) if here is not None else None, finished))


class Backoff:
    """The wait before attaching again: 0.5 s, doubling to 10 s, back to 0.5 s once attached.
    Over ssh it counts from the attempt's start, and grows only when the attempt failed at once
    (refused, no route): one that hung in ssh's connect while the network was down has waited
    already, so connects follow one another and one is under way when the link comes back.
    Measured, 75 s outage: 8.7-11 s from "link up" to attached when the back-off was waited out
    after each hung attempt."""

    def __init__(self) -> None:
        self._delay = BACKOFF_FIRST_S
        self._attempt = 0.0  # when the current attempt started (time.monotonic)

    def attempt(self) -> None:
        self._attempt = time.monotonic()

    def reset(self) -> None:
        self._delay = BACKOFF_FIRST_S

    def next_ms(self, counts_attempt: bool) -> int:
        """Milliseconds to wait before the next attempt (``counts_attempt``: over ssh)."""
        elapsed = time.monotonic() - self._attempt if counts_attempt else 0.0
        if elapsed >= self._delay:
            return 0
        wait = self._delay - elapsed
        self._delay = min(self._delay * 2, BACKOFF_MAX_S)
        return int(wait * 1000)


def kill_here(run_dir: str) -> None:
    """SIGKILL the process that holds the run's lock, when it runs on this machine."""
    process = live_process(run_dir)
    if process is not None and process.host == socket.gethostname():
        try:
            os.kill(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
