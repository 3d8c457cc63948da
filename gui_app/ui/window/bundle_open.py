"""BundleOpen: a run bundle (``replica-studio bundle``) opened in the window, dropped or from
File -> Open run bundle….

The bundle is checked whole and extracted (gui_app.core.bundle.open_bundle) on a Python thread
of its own (gui_app.ui.workers.background: a bundle with its model can be large), into a
temporary folder of this window's, which is removed when the window closes; then the copy opens
as any run does (its charts, evaluation, Export when the model is inside) and the run list shows
it as a row of its own (``listed``: RunsPanel.add_bundle), from which it is compared, exported,
and resumed when its checkpoints are -- in a new run folder of the runs folder, never in the
copy (``resume BUNDLE --runs-dir``). The bundle itself is never written. A bundle that does not
match its manifest, is truncated or would write outside its folder is refused: the one line that
says so in the status line and a dialog.
"""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Callable

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QMessageBox, QWidget

from gui_app.core.bundle import open_bundle
from gui_app.core.messages import typed_line
from gui_app.core.rundir import RunInfo, read_run
from gui_app.ui.shell import open_warning
from gui_app.ui.window.window_state import WindowState
from gui_app.ui.workers.background import Background, Send


def _extract(send: Send, bundle: str, folder: str) -> None:
    run_dir = open_bundle(bundle, folder)
    send((str(run_dir), read_run(run_dir), bundle))  # the run list's row, read here too (it reads the events)


class BundleOpen(QObject):
    opened = Signal(str)  # the run folder extracted from the bundle, once it is on screen
    listed = Signal(object, str)  # its RunInfo and the bundle's path: the run list's row
    failed = Signal(str)

    def __init__(self, window: QWidget, state: WindowState, open_run: Callable[[str], bool]) -> None:
        super().__init__(window)
        self._window, self._state, self._open_run = window, state, open_run
        self._background = Background(self)
        self._folders: list[str] = []
        self.message_box: QMessageBox | None = None  # the last refusal said

    def open(self, bundle: str) -> None:
        if not self._state.is_idle():
            self._state.set_status("A run is active: stop it before opening another")
            return
        folder = tempfile.mkdtemp(prefix="replica-studio-bundle-")
        self._folders.append(folder)
        self._state.set_status(f"Checking the bundle {Path(bundle).name}…")
        self._background.run(_extract, bundle, folder, deliver=self._on_extracted, failed=self._on_failed,
                             name="bundle-open")

    def busy(self) -> bool:
        return self._background.busy()

    def close(self) -> None:
        """The window closes: the extracted copies go."""
        self._background.wait()
        for folder in self._folders:
            shutil.rmtree(folder, ignore_errors=True)
        self._folders.clear()

    def _on_extracted(self, extracted: tuple[str, RunInfo, str]) -> None:
        run_dir, info, bundle = extracted
        if self._open_run(run_dir):
            self._state.set_status(f"Opened the bundle of {Path(run_dir).name} (a copy in {Path(run_dir).parent})")
            self.listed.emit(info, bundle)
            self.opened.emit(run_dir)

    def _on_failed(self, exc: BaseException) -> None:
        message = str(exc) if isinstance(exc, (OSError, ValueError)) else typed_line(exc)
        self._state.set_status(f"Bundle not opened: {message}")
        self.failed.emit(message)
        self.message_box = open_warning("Cannot open the bundle", message, self._window)
