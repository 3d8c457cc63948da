"""Cooperative control of a running engine: stop, pause, continue, checkpoint.

The training loop polls :class:`Control` between step groups. Commands arrive from a stdin
reader thread (``--control stdin``, used by the GUI's supervisor) and from SIGINT/SIGTERM/SIGUSR1.
End of stdin means the supervisor is gone, which acts as ``stop`` (with the reason "the
window went away", the same as a failed write to stdout; see ``engine/run/event_writer.py``).
"""
from __future__ import annotations

import signal
import sys
import threading
from types import FrameType
from typing import Protocol, TextIO

WINDOW_GONE = "the window went away"

COMMANDS = ("stop", "pause", "continue", "checkpoint")  # "resume": the old word for "continue"
STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGUSR1") if hasattr(signal, name))


class RunControl(Protocol):
    """What the training loop asks between step groups, in this order: ``paused`` (and then
    ``wait_while_paused``), ``stop_requested``, ``take_checkpoint_request``. :class:`Control`
    answers for this process; a multi-worker cluster's ``ClusterControl`` answers what every
    worker agreed (engine/cluster/agreement.py)."""

    @property
    def paused(self) -> bool: ...

    @property
    def stop_requested(self) -> bool: ...

    def wait_while_paused(self, timeout: float | None = None) -> bool: ...

    def take_checkpoint_request(self) -> bool: ...

    def command(self, word: str) -> None: ...


class Control:
    _signalled: Control | None = None  # whose handlers this process's stop signals call

    @classmethod
    def listening(cls, read_stdin: bool) -> Control:
        """This process's control: stopped by SIGINT, SIGTERM and SIGUSR1 and, with ``read_stdin``
        (``--control stdin``), driven by the lines of stdin."""
        control = cls()
        control.install_signal_handlers()
        if read_stdin:
            control.read_stream(sys.stdin)
        return control

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._running = threading.Event()  # cleared while paused
        self._running.set()
        self._checkpoint = threading.Event()
        self.stop_reason: str | None = None  # why the run stopped, when not asked by a user's "stop"

    # ---- commands ---------------------------------------------------------------------
    def command(self, word: str, reason: str | None = None) -> None:
        """Act on one control word; other words are ignored (a newer window's, a stray line)."""
        word = word.strip().lower()
        if word == "stop":
            if not self._stop.is_set():
                self.stop_reason = reason  # the first cause wins (a "stop" line, then end of input)
            self._stop.set()
            self._running.set()  # a paused run must wake up to stop
        elif word == "pause":
            self._running.clear()
        elif word in ("continue", "resume"):
            self._running.set()
        elif word == "checkpoint":
            self._checkpoint.set()

    # ---- what the loop asks -----------------------------------------------------------
    @property
    def stop_requested(self) -> bool:
        return self._stop.is_set()

    @property
    def paused(self) -> bool:
        return not self._running.is_set()

    def wait_while_paused(self, timeout: float | None = None) -> bool:
        """Block while paused; True once running (or stopping) again."""
        return self._running.wait(timeout)

    def take_checkpoint_request(self) -> bool:
        if self._checkpoint.is_set():
            self._checkpoint.clear()
            return True
        return False

    # ---- sources ----------------------------------------------------------------------
    def read_stream(self, stream: TextIO | None = None) -> threading.Thread:
        """Read commands from ``stream`` (stdin) in a daemon thread."""
        stream = stream or sys.stdin

        def pump() -> None:
            try:
                for line in stream:
                    self.command(line)
            except (OSError, ValueError):
                pass
            self.command("stop", WINDOW_GONE)  # end of input: the supervisor is gone

        thread = threading.Thread(target=pump, name="engine-control", daemon=True)
        thread.start()
        return thread

    def install_signal_handlers(self) -> None:
        """SIGINT, SIGTERM (``scancel``, a pod deleted) and SIGUSR1 (Slurm's warning before a time
        limit or a preemption, ``--signal``) stop the run with a checkpoint."""
        def handler(signum: int, frame: FrameType | None) -> None:
            self.command("stop", f"stopped by {signal.Signals(signum).name}")

        for sig in STOP_SIGNALS:
            try:
                signal.signal(sig, handler)
            except (ValueError, OSError):  # not the main thread, or not supported here
                pass
        Control._signalled = self


def reclaim_signals() -> None:
    """Install the stop handlers again. Making a MultiWorkerMirroredStrategy (or a parameter-server
    coordinator) starts TensorFlow's coordination service, whose C++ handler replaces ours
    ("preemption_notifier.cc: SIGTERM caught", TF 2.21; docs/architecture.md, "TensorFlow and Keras
    facts"): the run then ignored SIGTERM until Slurm's SIGKILL 30 s later. Called once the
    strategy exists."""
    if Control._signalled is not None:
        Control._signalled.install_signal_handlers()
