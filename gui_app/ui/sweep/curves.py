"""The trials' validation curves, read from their run directories off the GUI thread.

A sweep of 50 trials is 50 ``events.jsonl`` files, each as long as its run; reading them on the
GUI thread every poll would stall the window. :class:`CurveReader` reads on a thread that touches
no Qt (gui_app/ui/workers/background.py), only the files that grew since their last read, one
read at a time, and the GUI thread collects the curves.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from PySide6.QtCore import QObject, Signal

from gui_app.core.events import EpochEnd
from gui_app.core.rundir import EVENTS_FILE, read_events
from gui_app.ui.workers.background import Background, Send


@dataclass(frozen=True)
class Curve:
    """One run's validation figures per epoch (None where the run has none)."""

    epochs: tuple[int, ...]
    val_accuracy: tuple[float | None, ...]
    val_loss: tuple[float | None, ...]


def read_curve(run_dir: str) -> Curve:
    ends = [e for e in read_events(run_dir, parts=False) if isinstance(e, EpochEnd)]
    return Curve(tuple(e.epoch for e in ends), tuple(e.val_accuracy for e in ends), tuple(e.val_loss for e in ends))


def _size(run_dir: str) -> int:
    try:
        return os.stat(os.path.join(run_dir, EVENTS_FILE)).st_size
    except OSError:
        return -1


class CurveReader(QObject):
    """``request(run_dirs)`` reads the curves of those that changed; ``read`` brings every curve
    known so far, by run directory. A request while one is read waits for it (the newest only)."""

    read = Signal(dict)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._background = Background(self)
        self._sizes: dict[str, int] = {}
        self.curves: dict[str, Curve] = {}
        self._busy = False
        self._pending: list[str] | None = None

    def request(self, run_dirs: list[str]) -> None:
        if self._busy:
            self._pending = list(run_dirs)
            return
        self._busy = True
        known = dict(self._sizes)
        self._background.run(_read_changed, list(run_dirs), known, deliver=self._on_done, name="CurveReader")

    def _on_done(self, read: tuple[dict, dict]) -> None:
        curves, sizes = read
        self._busy = False
        self._sizes.update(sizes)
        self.curves.update(curves)
        self.read.emit(dict(self.curves))
        if self._pending is not None:
            pending, self._pending = self._pending, None
            self.request(pending)

    def close(self) -> None:
        """Wait for a read under way (the view closes: nothing may emit into a deleted object)."""
        self._pending = None
        self._background.wait()


def _read_changed(send: Send, run_dirs: list[str], known: dict[str, int]) -> None:
    """On its thread: sends (the curves of the runs whose events file changed size, their sizes)."""
    curves, sizes = {}, {}
    for run_dir in run_dirs:
        size = _size(run_dir)
        if size != known.get(run_dir):
            curves[run_dir], sizes[run_dir] = read_curve(run_dir), size
    send((curves, sizes))
