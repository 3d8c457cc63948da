"""The Tools menu: jobs beside training that run the engine on the configuration on the forms.

``ToolActions`` opens the Scaling benchmark (short timed bursts of every strategy and replica
count) and the Prepare dataset dialog (convert any dataset into TFRecord shards). Each dialog
runs its own engine process through the process runner; the window only opens them, keeps the
last one (tests, closing) and forwards their engine log lines to the Log tab.
"""
from __future__ import annotations

from typing import Callable

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import QDialog, QWidget

from gui_app.core.config import RunConfig
from gui_app.ui.dialogs.prepare import open_prepare_dialog
from gui_app.ui.dialogs.scaling import ScalingDialog


class ToolActions(QObject):
    log_line = Signal(str)

    def __init__(self, parent: QWidget, config: Callable[[], RunConfig | None], dataset_form,
                 engine_command: Callable[..., list[str]]) -> None:
        super().__init__(parent)
        self._parent, self._config, self._engine_command = parent, config, engine_command
        self._dataset_form = dataset_form  # Prepare reads its section and, after, points it at the shards
        self.dialog: QDialog | None = None  # the last tool dialog opened

    def open_scaling(self) -> ScalingDialog | None:
        config = self._config()
        if config is None:  # the forms have errors; the menu entry is disabled then
            return None
        return self._open(ScalingDialog(config, self._parent, engine_command=self._engine_command))

    def open_prepare(self) -> QDialog:
        return self._track(open_prepare_dialog(self._parent, self._dataset_form, self._engine_command))

    def _open(self, dialog: QDialog) -> QDialog:
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.open()  # window-modal, not blocking
        return self._track(dialog)

    def _track(self, dialog: QDialog) -> QDialog:
        dialog.log_line.connect(self.log_line)
        dialog.finished.connect(lambda _code: self._forget(dialog))
        self.dialog = dialog
        return dialog

    def _forget(self, dialog: QDialog) -> None:
        if self.dialog is dialog:
            self.dialog = None

    def close(self) -> None:
        if self.dialog is not None:
            self.dialog.reject()  # cancels a running measurement
