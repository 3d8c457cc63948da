"""The File side of the main window: past runs (open, overlay, recent), configuration
files, a new run, and drag and drop (images and exported models go to the Try tab).

A mixin of MainWindow: it uses the window's panels and helpers (``config_panel``, ``runs``,
``charts``, ``settings``, ``supervisor``, ``_clear_run_view``, ...), and is kept apart so
the window module stays about layout, wiring and the live run.
"""
from __future__ import annotations

from pathlib import Path

from PySide6.QtGui import QDragEnterEvent, QDropEvent
from PySide6.QtWidgets import QFileDialog, QMessageBox

from gui_app.core.config import ConfigError, RunConfig
from gui_app.core.rundir import CONFIG_FILE, read_events
from gui_app.ui.config.config_panel import first_launch_config
from gui_app.ui.tabs.try_model import is_image_path


class WindowFiles:
    def open_run(self, run_dir: str) -> bool:
        """Show a finished run's charts (from its events.jsonl) and its evaluation."""
        path = Path(run_dir)
        if self.supervisor.is_active():
            self.state_label.setText("A run is active: stop it before opening another")
            return False
        if not (path / CONFIG_FILE).is_file():
            QMessageBox.warning(self, "Not a run", f"{path} is not a run directory (it has no {CONFIG_FILE}).")
            return False
        self._clear_run_view()
        self._add_events(list(read_events(path)))
        for chart in (self.training_charts, self.replica_charts):
            chart.flush()
        has_eval = self._show_evaluation(str(path))
        self.shown_run = str(path)
        self.setWindowTitle(f"Replica Studio — {path.name}")
        self.progress.set_message(f"{path.name}: {self.runs.status_of(path) or 'run'}")
        # Stay on the evaluation or the Try tab when the run has one to show; else the charts.
        current = self.tabs.currentWidget()
        if not ((current is self.evaluation and has_eval) or (current is self.try_panel and self.model_run())):
            self.tabs.setCurrentWidget(self.training_charts)
        self._add_recent(str(path))
        self._model_run_changed()
        return True

    def overlay_runs(self, main_run: str, other_run: str) -> None:
        if self.open_run(main_run):
            self.training_charts.set_overlay(list(read_events(other_run)), Path(other_run).name)
            self.progress.set_message(f"{Path(main_run).name}, overlaid with {Path(other_run).name}")

    def new_run(self) -> None:
        self._clear_run_view()
        self.config_panel.set_config(first_launch_config(self.config_panel.devices.gpu_names()))

    def _add_recent(self, run_dir: str) -> None:
        self.settings.add_recent_run(run_dir)
        self.actions.fill_recent(self.settings.recent_runs, self.open_run, self._clear_recent)

    def _clear_recent(self) -> None:
        self.settings.recent_runs = []
        self.actions.fill_recent([], self.open_run, self._clear_recent)

    def load_config_file(self, path: str | Path) -> None:
        """Fill the forms from a run configuration; ConfigError names the problem."""
        self.config_panel.set_config(RunConfig.load(path))
        self.settings.last_open_dir = str(Path(path).parent)

    def _on_open_run_dialog(self) -> None:
        path = QFileDialog.getExistingDirectory(self, "Open a run", str(self.runs_dir))
        if path:
            self.open_run(path)

    def _on_load_config_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Load a run configuration", self.settings.last_open_dir or "",
                                              "Run configurations (*.json)")
        if path:
            try:
                self.load_config_file(path)
            except ConfigError as exc:
                QMessageBox.warning(self, "Cannot load the configuration", str(exc))

    def _on_save_config_dialog(self) -> None:
        config = self.config_panel.config()
        if config is None:
            return
        path, _ = QFileDialog.getSaveFileName(self, "Save the run configuration",
                                              str(Path(self.settings.last_open_dir or Path.home()) / "run.json"),
                                              "Run configurations (*.json)")
        if path:
            try:
                config.save(path)
            except OSError as exc:
                QMessageBox.warning(self, "Cannot save the configuration", f"{path}: {exc.strerror or exc}")
                return
            self.settings.last_open_dir = str(Path(path).parent)
            self.state_label.setText(f"Configuration saved to {path}")

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:  # noqa: N802 (Qt override)
        if event.mimeData().hasUrls() and any(u.isLocalFile() for u in event.mimeData().urls()):
            event.acceptProposedAction()

    def dropEvent(self, event: QDropEvent) -> None:  # noqa: N802 (Qt override)
        paths = [u.toLocalFile() for u in event.mimeData().urls() if u.isLocalFile()]
        images = [p for p in paths if is_image_path(Path(p))]
        if images:  # several images at once are all for the Try tab
            self.try_images(images)
        elif paths:
            self.open_dropped(paths[0])
        if paths:
            event.acceptProposedAction()

    def open_dropped(self, path: str) -> None:
        """A run folder opens the run, a .json loads a configuration, a .keras becomes the
        model to train; an image, a .tflite, .onnx or SavedModel folder goes to the Try tab;
        anything else is taken as a dataset."""
        p = Path(path)
        if is_image_path(p):
            self.try_images([path])
        elif p.suffix.lower() in (".tflite", ".onnx") or (p / "saved_model.pb").is_file():
            self.try_model(p)
        elif self.supervisor.is_active():
            self.state_label.setText("A run is active: drop files once it has finished")
        elif p.is_dir() and (p / CONFIG_FILE).is_file():
            self.open_run(path)
        elif p.suffix == ".json":
            try:
                self.load_config_file(p)
            except ConfigError as exc:
                QMessageBox.warning(self, "Cannot load the configuration", str(exc))
        elif p.suffix == ".keras":
            self.config_panel.model.open_path(p)
        else:
            self.config_panel.dataset.open_path(p)
            self.tabs.setCurrentWidget(self.preview)
