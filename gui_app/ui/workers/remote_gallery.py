"""RemoteGallery: the misclassified test images of a run on an SSH host, copied back.

A run's evaluation comes to the window as its ``eval`` event (attached, or replayed by Open),
but the images of its gallery are in ``misclassified.npz`` beside it, on the host: copied back by
``hosts fetch HOST RUN_DIR/misclassified.npz --to TMP --json``, an EngineJob like every other
command the window runs (the engine process waits for ssh, the GUI thread waits for nothing),
then read and checked on a thread that touches no Qt (gui_app/ui/workers/background.py), and the
copy removed.

    fetched(key, arrays, problem)   ``HOST:RUN_DIR``; the checked arrays (None when not copied)
                                    and, then, the one line that says why
"""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Callable

from PySide6.QtCore import QObject, Signal

import numpy as np

from gui_app.core.answers import Fetched, reader
from gui_app.core.rundir import MISCLASSIFIED_FILE
from gui_app.core.ssh_hosts import split_run_key
from gui_app.identity import app_command
from gui_app.ui.workers.background import Background, Send
from gui_app.ui.workers.engine_job import EngineJob

FETCH_TIMEOUT_S = 120.0  # a hung connection is a line in the gallery's title, not "copying…" for ever
PREFIX = "replica-studio hosts fetch: "  # the command names itself; the title says what failed


class RemoteGallery(QObject):
    fetched = Signal(str, object, str)

    def __init__(self, load: Callable[[Path], dict[str, np.ndarray] | None],
                 engine_command: Callable[..., list[str]] = app_command, parent: QObject | None = None) -> None:
        """``load(path)``: the checked arrays of a misclassified.npz (ValueError naming the file)."""
        super().__init__(parent)
        self._load, self._engine_command = load, engine_command
        self._background = Background(self)
        self._copies: dict[QObject, tuple[str, Path]] = {}  # each running copy's run key and folder here

    def fetch(self, key: str) -> None:
        host_name, run_dir = split_run_key(key)
        folder = Path(tempfile.mkdtemp(prefix="replica-studio-gallery-"))
        command = self._engine_command("hosts", "fetch", host_name or "", f"{run_dir}/{MISCLASSIFIED_FILE}",
                                       "--to", str(folder), "--json")
        job = EngineJob(command, name="the copy", read=reader(Fetched), timeout_s=FETCH_TIMEOUT_S, parent=self)
        # The job's signals go to this object's own methods, its copy's key and folder looked up by
        # the job: a closure over ``self`` connected to a child's signal would hold this object's
        # wrapper until the child is deleted, and deleting the child would then delete this object,
        # and the child again inside its own destructor (a segfault seen in the tests, where the
        # gallery has no parent).
        self._copies[job] = (key, folder)
        job.on_result(self._copied).on_failure(self._failed).on_finished(self._ended).start()

    def _copied(self, answer: Fetched) -> None:
        """The copy is here: read on a thread, which removes the folder once it has read it."""
        key, folder = self._copies[self.sender()]
        self._background.run(_read, key, Path(answer.path), folder, self._load,
                             deliver=self._deliver, name="remote-gallery")

    def _deliver(self, result: tuple) -> None:
        self.fetched.emit(*result)

    def _failed(self, line: str) -> None:
        key, folder = self._copies[self.sender()]
        shutil.rmtree(folder, ignore_errors=True)
        self.fetched.emit(key, None, line.removeprefix(PREFIX) or "failed")

    def _ended(self) -> None:
        job = self.sender()
        self._copies.pop(job, None)
        job.deleteLater()  # after its last signal


def _read(send: Send, key: str, path: Path, folder: Path, load: Callable[[Path], dict[str, np.ndarray] | None]) -> None:
    """On its thread: sends (key, the checked arrays or None, the line that says why not)."""
    arrays, problem = None, ""
    try:
        arrays = load(path)
    except ValueError as exc:
        problem = str(exc).strip().splitlines()[0] if str(exc).strip() else "failed"
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    send((key, arrays, problem))
