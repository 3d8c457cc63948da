"""RemoteGallery: the misclassified test images of a run on an SSH host, copied back.

A run's evaluation comes to the window as its ``eval`` event (attached, or replayed by Open),
but the images of its gallery are in ``misclassified.npz`` beside it, on the host: copied back
over the shared connection (gui_app.core.ssh_files.fetch, as ``export --host`` brings its
files), read and checked, and the copy removed. On a thread that touches no Qt (the copy waits for
the network; gui_app/ui/workers/background.py).

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

from gui_app.core.hosts import HostsFileError, find_host, split_run_key
from gui_app.core.rundir import MISCLASSIFIED_FILE
from gui_app.core.ssh import HostError
from gui_app.core.ssh_files import fetch
from gui_app.ui.workers.background import Background, Send


class RemoteGallery(QObject):
    fetched = Signal(str, object, str)

    def __init__(self, load: Callable[[Path], dict[str, np.ndarray] | None], parent: QObject | None = None) -> None:
        """``load(path)``: the checked arrays of a misclassified.npz (ValueError naming the file)."""
        super().__init__(parent)
        self._load = load
        self._background = Background(self)

    def fetch(self, key: str) -> None:
        self._background.run(_fetch, key, self._load, deliver=lambda result: self.fetched.emit(*result),
                             name="remote-gallery")


def _fetch(send: Send, key: str, load: Callable[[Path], dict[str, np.ndarray] | None]) -> None:
    """On its thread: sends (key, the checked arrays or None, the line that says why not)."""
    host_name, run_dir = split_run_key(key)
    folder = Path(tempfile.mkdtemp(prefix="replica-studio-gallery-"))
    arrays, problem = None, ""
    try:
        fetch(find_host(host_name or ""), f"{run_dir}/{MISCLASSIFIED_FILE}", folder)
        arrays = load(folder / MISCLASSIFIED_FILE)
    except (HostError, HostsFileError, ValueError) as exc:
        problem = str(exc).strip().splitlines()[0] if str(exc).strip() else "failed"
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    send((key, arrays, problem))
