"""The trained-model side of the main window: the Export menu and dialog, and the Try tab.

A mixin of MainWindow, like ``WindowFiles``: it uses the window's ``shown_run``, ``runs``,
``tabs``, ``try_panel``, ``actions`` and ``settings``.

The run on screen (one just trained, or one opened from the run list) is the *model run*
when it has a ``model.keras``: the Export menu exports it, and the Try tab tries it. The Try
tab loads it only when the tab is shown -- loading imports TensorFlow into the GUI process,
which nobody who never opens the tab should pay for -- and a model the user opened in the Try
tab stays until another run comes on screen.
"""
from __future__ import annotations

from pathlib import Path

import shiboken6
from PySide6.QtCore import Qt

from gui_app.core.export import ExportResult
from gui_app.core.rundir import MODEL_FILE
from gui_app.ui.dialogs.export import ExportDialog


class WindowModels:
    export_dialog: ExportDialog | None = None  # the last export dialog opened (tests, closing)
    _try_pending: str | None = None  # a model run the Try tab loads when it is next shown

    def model_run(self) -> str | None:
        """The run on screen, when it has a trained model."""
        run = self.shown_run
        return run if run and (Path(run) / MODEL_FILE).is_file() else None

    def export_model(self, fmt: str = "keras", run_dir: str | None = None) -> ExportDialog | None:
        """Open the export dialog for ``run_dir`` (default: the run on screen) in format ``fmt``."""
        run_dir = run_dir or self.model_run()
        if run_dir is None:
            return None
        folder = self.settings.last_export_dir
        dialog = ExportDialog(run_dir, fmt, self, folder=folder if folder and Path(folder).is_dir() else None)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.succeeded.connect(self._on_exported)
        self.export_dialog = dialog
        dialog.open()  # window-modal, not blocking: training events keep arriving
        return dialog

    def try_model_file(self) -> None:
        """File → Try a model file…: the Try tab, then its file dialog."""
        self._try_pending = None
        self.tabs.setCurrentWidget(self.try_panel)
        self.try_panel.open_model_file_dialog()

    def try_images(self, paths: list[str]) -> None:
        """Images dropped anywhere on the window are for the Try tab's model."""
        self.tabs.setCurrentWidget(self.try_panel)  # loads the model run first, if it is pending
        self.try_panel.add_image_files(paths)

    def try_model(self, path: str | Path) -> None:
        """An exported model (dropped or opened) goes to the Try tab."""
        self._try_pending = None
        self.tabs.setCurrentWidget(self.try_panel)
        self.try_panel.set_model_source(path)

    def _model_run_changed(self) -> None:
        """The run on screen changed or got its model: update the Export menu and the Try tab."""
        self._update_actions()
        run = self.model_run()
        if run is not None:
            self._try_pending = run
            if self.tabs.currentWidget() is self.try_panel:
                self._load_pending_model()

    def _on_tab_changed(self, _index: int) -> None:
        if self.tabs.currentWidget() is self.try_panel:
            self._load_pending_model()

    def _load_pending_model(self) -> None:
        run, self._try_pending = self._try_pending, None
        if run is not None and self.try_panel.model_source() != Path(run):
            self.try_panel.set_model_source(run)

    def _on_exported(self, result: ExportResult) -> None:
        if result.written:
            self.settings.last_export_dir = self.try_panel.last_dir = str(result.path.parent)
            self.log.note(f"Exported {result.path}" + (f": {result.parity.summary()}" if result.parity else ""))

    def _cancel_export(self) -> None:
        dialog = self.export_dialog
        if dialog is not None and shiboken6.isValid(dialog) and dialog.is_running():
            dialog.reject()  # cancels; nothing half-written is left
