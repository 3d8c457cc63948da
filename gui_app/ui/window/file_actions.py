"""FileActions: the File side of the main window -- past runs (open, overlay, recent),
configuration files, a new run, and drops.

The contract: it is given what it works on (the run on screen, the config panel, the run list,
the tabs, the settings, the model actions) and nothing else; it never starts or stops a run,
it only asks ``is_busy()`` whether one is active (files are opened only while idle, as the
menus say). ``status(str)`` carries a line for the status bar; ``recent_changed(list)`` the
new recent-runs list for the File menu.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QFileDialog, QMessageBox, QTabWidget, QWidget

from gui_app.core.config import ConfigError, RunConfig
from gui_app.core.file_kinds import is_image_file, model_kind
from gui_app.core.rundir import CONFIG_FILE, is_run_dir, read_history
from gui_app.ui.config.config_panel import ConfigPanel, first_launch_config
from gui_app.ui.settings import Settings
from gui_app.ui.window.model_actions import ModelActions
from gui_app.ui.window.runs_panel import RunsPanel
from gui_app.ui.window.shown_run import ShownRun


class FileActions(QObject):
    status = Signal(str)
    recent_changed = Signal(list)

    def __init__(self, window: QWidget, *, shown: ShownRun, config_panel: ConfigPanel, runs: RunsPanel,
                 tabs: QTabWidget, dataset_tab: QWidget, models: ModelActions, settings: Settings,
                 runs_dir: Path, is_busy: Callable[[], bool]) -> None:
        super().__init__(window)
        self._window, self._shown, self._config, self._runs = window, shown, config_panel, runs
        self._tabs, self._models, self._settings, self._runs_dir = tabs, models, settings, runs_dir
        self._dataset_tab, self._is_busy = dataset_tab, is_busy

    # ---- runs ------------------------------------------------------------------------------
    def open_run(self, run_dir: str) -> bool:
        """Show a finished run's charts (from its events.jsonl) and its evaluation."""
        path = Path(run_dir)
        if self._is_busy():
            self.status.emit("A run is active: stop it before opening another")
            return False
        if not is_run_dir(path):
            QMessageBox.warning(self._window, "Not a run", f"{path} is not a run directory (it has no {CONFIG_FILE}).")
            return False
        current = self._tabs.currentWidget()
        has_eval = self._shown.show_history(path)
        self._shown.progress.set_message(f"{path.name}: {self._runs.status_of(path) or 'run'}")
        # Stay on the evaluation or the Try tab when the run has one to show; else the charts.
        if not ((current is self._shown.evaluation and has_eval)
                or (current is self._models.try_panel and self._shown.model_run())):
            self._tabs.setCurrentWidget(self._shown.training)
        self.add_recent(str(path))
        return True

    def overlay_runs(self, main_run: str, other_run: str) -> None:
        if self.open_run(main_run):
            self._shown.training.set_overlay(read_history(other_run).training, Path(other_run).name)
            self._shown.progress.set_message(f"{Path(main_run).name}, overlaid with {Path(other_run).name}")

    def new_run(self) -> None:
        self._shown.clear()
        self._config.set_config(first_launch_config(self._config.devices.gpu_names()))

    def add_recent(self, run_dir: str) -> None:
        self._settings.add_recent_run(run_dir)
        self.recent_changed.emit(list(self._settings.recent_runs))

    def clear_recent(self) -> None:
        self._settings.recent_runs = []
        self.recent_changed.emit([])

    # ---- configuration files -------------------------------------------------------------------
    def load_config_file(self, path: str | Path) -> None:
        """Fill the forms from a run configuration; ConfigError names the problem."""
        self._config.set_config(RunConfig.load(path))
        self._settings.last_open_dir = str(Path(path).parent)

    def open_run_dialog(self) -> None:
        path = QFileDialog.getExistingDirectory(self._window, "Open a run", str(self._runs_dir))
        if path:
            self.open_run(path)

    def load_config_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self._window, "Load a run configuration",
                                              self._settings.last_open_dir or "", "Run configurations (*.json)")
        if path:
            self._load_config_or_warn(path)

    def save_config_dialog(self) -> None:
        config = self._config.config()
        if config is None:
            return
        path, _ = QFileDialog.getSaveFileName(self._window, "Save the run configuration",
                                              str(Path(self._settings.last_open_dir or Path.home()) / "run.json"),
                                              "Run configurations (*.json)")
        if path:
            try:
                config.save(path)
            except OSError as exc:
                QMessageBox.warning(self._window, "Cannot save the configuration", f"{path}: {exc.strerror or exc}")
                return
            self._settings.last_open_dir = str(Path(path).parent)
            self.status.emit(f"Configuration saved to {path}")

    def _load_config_or_warn(self, path: str | Path) -> None:
        try:
            self.load_config_file(path)
        except ConfigError as exc:
            QMessageBox.warning(self._window, "Cannot load the configuration", str(exc))

    # ---- drops -----------------------------------------------------------------------------------
    def drop(self, paths: list[str]) -> None:
        """Several images at once are all for the Try tab; otherwise the first path is opened."""
        images = [p for p in paths if is_image_file(p)]
        if images:
            self._models.try_images(images)
        elif paths:
            self.open_dropped(paths[0])

    def open_dropped(self, path: str) -> None:
        """A run folder opens the run, a .json loads a configuration, a .keras becomes the
        model to train; an image, a .tflite, .onnx or SavedModel folder goes to the Try tab;
        anything else is taken as a dataset."""
        p = Path(path)
        kind = model_kind(p)
        if is_image_file(p):
            self._models.try_images([path])
        elif kind in ("tflite", "onnx", "savedmodel"):
            self._models.try_model(p)
        elif self._is_busy():
            self.status.emit("A run is active: drop files once it has finished")
        elif p.is_dir() and is_run_dir(p):
            self.open_run(path)
        elif p.suffix.lower() == ".json":
            self._load_config_or_warn(p)
        elif kind == "keras":
            self._config.model.open_path(p)
        else:
            self._config.dataset.open_path(p)
            self._tabs.setCurrentWidget(self._dataset_tab)
