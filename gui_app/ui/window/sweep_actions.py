"""SweepActions: Tools -> New sweep… and Open sweep…, and the sweep views they open.

A sweep runs without the window (``sweep --detach``: a process of its own session, docs/sweeps.md),
so the window only starts it and follows it in a :class:`~gui_app.ui.sweep.view.SweepView`, one
per sweep folder. A view's buttons come back here: Open trial opens the run as the run list's
Open does, Compare trials opens the run comparison of the trials' runs, Train the best config
fills the forms (the user presses Train), Export the best model opens the export dialog for that
run; a sweep's end goes to the desktop notifications.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import QFileDialog, QMessageBox, QWidget

from gui_app.core.config import RunConfig
from gui_app.core.config_json import ConfigError
from gui_app.core.rundir import default_sweeps_dir
from gui_app.ui.config.config_panel import ConfigPanel
from gui_app.ui.notifications import RunNotifications
from gui_app.ui.sweep.new_sweep import NewSweepDialog
from gui_app.ui.sweep.view import SweepView
from gui_app.ui.window.file_actions import FileActions
from gui_app.ui.window.model_actions import ModelActions
from gui_app.ui.window.window_state import WindowState


class SweepActions(QObject):
    log_line = Signal(str)
    view_opened = Signal(object)  # a SweepView (tests)
    open_run = Signal(str)  # a trial's run: its folder here, or HOST:RUN_DIR (the window opens both)

    def __init__(self, window: QWidget, state: WindowState, *, forms: ConfigPanel, files: FileActions,
                 models: ModelActions, notifications: RunNotifications,
                 engine_command: Callable[..., list[str]]) -> None:
        super().__init__(window)
        self._window, self._state, self._forms, self._files, self._models = window, state, forms, files, models
        self._notifications, self._engine_command = notifications, engine_command
        self.dialog: NewSweepDialog | None = None
        self.views: dict[str, SweepView] = {}  # by sweep folder
        # The forms' training set size, from their last dataset check: the dialog's steps per trial.
        self._train_examples: int | None = None
        forms.inspected.connect(self._on_inspected)
        forms.inspect_cleared.connect(lambda: setattr(self, "_train_examples", None))

    @property
    def sweeps_dir(self) -> Path:
        return default_sweeps_dir()

    def new_sweep(self) -> NewSweepDialog | None:
        """The New sweep dialog over the forms' configuration (the menu entry needs valid forms)."""
        config = self._forms.config()
        if config is None:
            return None
        dialog = NewSweepDialog(config, self.sweeps_dir, self._engine_command, self._window,
                                train_examples=self._train_examples)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.started.connect(self.open_sweep)
        dialog.log_line.connect(self.log_line)
        dialog.finished.connect(lambda _code: setattr(self, "dialog", None))
        self.dialog = dialog
        dialog.open()
        return dialog

    def _on_inspected(self, result: dict, _samples: str) -> None:
        examples = (result.get("dataset") or {}).get("train_examples")
        self._train_examples = examples if isinstance(examples, int) and examples > 0 else None

    def open_sweep_dialog(self) -> None:
        start = self.sweeps_dir if self.sweeps_dir.is_dir() else Path.home()
        path = QFileDialog.getExistingDirectory(self._window, "Open sweep", str(start))
        if path:
            self.open_sweep(path)

    def open_sweep(self, sweep_dir: str) -> SweepView | None:
        """The view of ``sweep_dir`` (raised when it is open already)."""
        key = str(Path(sweep_dir).resolve())
        view = self.views.get(key)
        if view is None:
            try:
                view = SweepView(sweep_dir, self._engine_command)
            except ConfigError as exc:
                QMessageBox.warning(self._window, "Not a sweep", f"{sweep_dir} is not a sweep folder: {exc}")
                return None
            view.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
            view.destroyed.connect(lambda _=None, key=key: self.views.pop(key, None))
            view.open_run.connect(self.open_run)
            view.compare_runs.connect(self._files.compare_runs)
            view.train_config.connect(self._train_config)
            view.export_run.connect(lambda run_dir: self._models.export_model("keras", run_dir))
            view.ended.connect(self._notifications.on_sweep_ended)
            view.log_line.connect(self.log_line)
            self.views[key] = view
            self.view_opened.emit(view)
        view.show()
        view.raise_()
        view.activateWindow()
        return view

    def _train_config(self, config: RunConfig) -> None:
        if not self._state.is_idle():
            self._state.set_status("A run is active: stop it before loading the sweep's best configuration")
            return
        self._forms.set_config(config)
        self._window.raise_()
        self._state.set_status("The best trial's configuration is on the forms: press Train")

    def close(self) -> None:
        """The window closes: the views close (their sweeps go on)."""
        for view in list(self.views.values()):
            view.close()
