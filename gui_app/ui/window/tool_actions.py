"""The Tools menu: jobs beside training that run the engine on what the forms say.

``TOOLS`` is the menu: each entry names its label, its tip, its dialog (a
:class:`~gui_app.ui.dialogs.job_dialog.JobDialog` that opens with ``for_forms``) and whether it
needs a valid configuration (every tool needs the window idle: its engine process would compete
with a run for the same cores or GPUs). A new tool is its engine command module (registered in
gui_app/engine/commands/cli.py), its dialog on JobDialog, and one entry here.

``ToolActions`` opens them: each dialog runs its own engine job; the window only opens it, keeps
the last one (tests, closing) and forwards its engine log lines to the Log tab.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import QWidget

from gui_app.ui.config.config_panel import ConfigPanel
from gui_app.ui.dialogs.job_dialog import JobDialog
from gui_app.ui.dialogs.prepare import PrepareDialog
from gui_app.ui.dialogs.rehearse import RehearseDialog
from gui_app.ui.dialogs.scaling import ScalingDialog


@dataclass(frozen=True)
class Tool:
    key: str  # names its menu action: WindowActions.tools[key]
    label: str
    tip: str
    dialog: type[JobDialog]
    needs_valid_config: bool


TOOLS = (
    Tool("prepare", "&Prepare dataset as TFRecord shards…",
         "Convert the dataset on the forms into TFRecord shards, to stream it here or on a cluster",
         PrepareDialog, needs_valid_config=False),
    Tool("scaling", "&Scaling benchmark…",
         "Time every strategy and replica count on this dataset, model and batch; see the speed-up and where "
         "the time goes", ScalingDialog, needs_valid_config=True),
    Tool("rehearse", "&Rehearse preemption…",
         "Train the configuration interrupted at a step and resumed, and straight through; certify that both "
         "are the same run, step for step", RehearseDialog, needs_valid_config=True),
)


class ToolActions(QObject):
    log_line = Signal(str)

    def __init__(self, parent: QWidget, forms: ConfigPanel, engine_command: Callable[..., list[str]]) -> None:
        super().__init__(parent)
        self._parent, self._forms, self._engine_command = parent, forms, engine_command
        self.dialog: JobDialog | None = None  # the last tool dialog opened

    def open(self, tool: Tool) -> JobDialog | None:
        """Open ``tool``'s dialog over the forms (window-modal, not blocking); None when the forms
        give it nothing to run (the menu entry is disabled then)."""
        dialog = tool.dialog.for_forms(self._forms, self._parent, self._engine_command)
        if dialog is None:
            return None
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.log_line.connect(self.log_line)
        dialog.finished.connect(lambda _code: self._forget(dialog))
        self.dialog = dialog
        dialog.open()
        return dialog

    def _forget(self, dialog: JobDialog) -> None:
        if self.dialog is dialog:
            self.dialog = None

    def close(self) -> None:
        """The window closes: end a running tool's process (waiting for it) and close its dialog."""
        if self.dialog is not None:
            self.dialog.shutdown()
            self.dialog.reject()
