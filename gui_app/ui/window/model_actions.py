"""ModelActions: the Export menu and dialog, and what the Try tab tries.

The contract: it follows the window's state -- the run on screen and the tab on show -- and owns
the export dialogs it opens and the Try tab's model choice. The Export menu exports the run
selected in the run list, else the run on screen, when it has a model or a checkpoint
(``WindowState.export_choice``, which also says why not), and the run list exports a run of an
SSH host too (``HOST:RUN_DIR``: ``export --host``, the files copied back here); the
Try tab tries the
model run (the run on screen, when it has a ``model.keras``: ``WindowState.model_run``; a host's
completed run tries its model there, ``predict --serve --host``), and
starts its ``predict --serve`` engine process only when the tab is shown (a TensorFlow start
nobody who never opens the tab should pay for); a model the user opened in the Try tab stays
until another run comes on screen.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

import shiboken6
from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import QWidget

from gui_app.core.export_result import ExportResult
from gui_app.core.ssh_hosts import split_run_key
from gui_app.ui.dialogs.export import ExportDialog
from gui_app.ui.settings import Settings
from gui_app.ui.tabs.try_model import TryTab
from gui_app.ui.window.window_state import TRY, WindowState


class ModelActions(QObject):
    note = Signal(str)  # a line for the Log tab
    log_line = Signal(str)  # engine stderr of an export, for the Log tab

    def __init__(self, window: QWidget, state: WindowState, try_tab: TryTab, settings: Settings,
                 engine_command: Callable[..., list[str]]) -> None:
        super().__init__(window)
        self._window, self._state, self._try = window, state, try_tab
        self._settings, self._engine_command = settings, engine_command
        self.export_dialog: ExportDialog | None = None  # the last export dialog opened
        self._try_pending: str | None = None  # a model run the Try tab loads when it is next shown
        state.shown_run_changed.connect(self._on_shown_run_changed)
        state.tab_changed.connect(self._on_tab_changed)

    def export_model(self, fmt: str = "keras", run_dir: str | None = None) -> ExportDialog | None:
        """Open the export dialog for ``run_dir`` (default: the Export menu's run) in format ``fmt``."""
        run_dir = run_dir or self._state.export_run()
        if run_dir is None:
            return None
        self._state.clear_run_status()  # the user turned to the export: how a run ended is old news
        folder = self._settings.last_export_dir
        host_name, there = split_run_key(run_dir)
        command = self._engine_command if host_name is None else (
            lambda *args: self._engine_command(*args, "--host", host_name))  # written there, copied back here
        dialog = ExportDialog(there, fmt, self._window, folder=folder if folder and Path(folder).is_dir() else None,
                              # the run list offers a host's run only with its trained model
                              engine_command=command, trained=None if host_name is None else True)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.succeeded.connect(self._on_exported)
        dialog.log_line.connect(self.log_line)
        self.export_dialog = dialog
        dialog.open()  # window-modal, not blocking: training events keep arriving
        return dialog

    def try_model_file(self) -> None:
        """File → Try a model file…: the Try tab, then its file dialog."""
        self._try_pending = None
        self._state.set_tab(TRY)
        self._try.open_model_file_dialog()

    def try_images(self, paths: list[str]) -> None:
        """Images dropped anywhere on the window are for the Try tab's model."""
        self._state.set_tab(TRY)  # loads the model run first, if it is pending
        self._try.add_image_files(paths)

    def try_model(self, path: str | Path) -> None:
        """An exported model (dropped or opened) goes to the Try tab."""
        self._try_pending = None
        self._state.set_tab(TRY)
        self._try.set_model_source(path)

    def close(self) -> None:
        """The window closes: cancel a running export (nothing half-written is left), end the
        Try tab's model process."""
        dialog = self.export_dialog
        if dialog is not None and shiboken6.isValid(dialog):
            dialog.shutdown()
        self._try.shutdown()

    def _on_shown_run_changed(self, _run: str) -> None:
        run = self._state.model_run()
        if run is not None:
            self._try_pending = run
            if self._state.tab == TRY:
                self._load_pending_model()

    def _on_tab_changed(self, tab: str) -> None:
        if tab == TRY:
            self._state.clear_run_status()  # trying models: the line about the run on screen is old news
            self._load_pending_model()

    def _load_pending_model(self) -> None:
        run, self._try_pending = self._try_pending, None
        if run is not None and self._try.model_source() != Path(run):
            self._try.set_model_source(run)

    def _on_exported(self, result: ExportResult) -> None:
        if result.written:
            self._settings.last_export_dir = self._try.last_dir = str(result.path.parent)
            self.note.emit(f"Exported {result.path}" + (f": {result.parity.summary()}" if result.parity else ""))
