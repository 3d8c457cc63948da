"""MainWindow: lays out the panels and wires them together; it computes nothing itself.

Left: the ConfigPanel (devices, dataset, model, strategy, hyperparameters). Right: the run's
progress, the tabs (Dataset, Training, Replicas, Evaluation, Try, Log) and the run list. The
RunSupervisor runs the engine; its batched events feed the charts and the progress line.

The window owns objects with one job each, composed here: ``shown`` (:class:`ShownRun`, the
run on screen, with its ``changed`` signal), ``models`` (:class:`ModelActions`, the Export
menu and the Try tab), ``files`` (:class:`FileActions`, open, drop, load, save) and
``tools`` (:class:`ToolActions`, the Tools menu's dialogs) and ``actions``
(:class:`WindowActions`, menus and toolbar). Every engine process -- training,
devices, inspection, export, prediction -- is built by the same ``engine_command``.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

from PySide6.QtCore import QByteArray, Qt, QTimer
from PySide6.QtGui import QCloseEvent, QDragEnterEvent, QDropEvent
from PySide6.QtWidgets import QLabel, QMainWindow, QMessageBox, QSplitter, QTabWidget, QVBoxLayout, QWidget

from gui_app.core.config import ConfigError, RunConfig
from gui_app.core.events import Error, Event, RunStarted, Step
from gui_app.identity import app_command as default_engine_command
from gui_app.ui.config.config_panel import ConfigPanel, first_launch_config
from gui_app.ui.dialogs.about import about_html
from gui_app.ui.dialogs.getting_started import GettingStartedDialog
from gui_app.ui.dialogs.resume import ResumeDialog
from gui_app.ui.settings import Settings, load_settings, resolve_runs_dir, save_settings
from gui_app.ui.shell import show_tensorflow_unavailable
from gui_app.ui.tabs.dataset import DatasetTab
from gui_app.ui.tabs.evaluation import EvaluationTab
from gui_app.ui.tabs.log import LogTab
from gui_app.ui.tabs.replicas import ReplicasTab
from gui_app.ui.tabs.training import TrainingTab
from gui_app.ui.tabs.try_model import TryTab
from gui_app.ui.window.actions import WindowActions
from gui_app.ui.window.file_actions import FileActions
from gui_app.ui.window.model_actions import ModelActions
from gui_app.ui.window.run_progress import RunProgress
from gui_app.ui.window.runs_panel import RunsPanel
from gui_app.ui.window.shown_run import ShownRun
from gui_app.ui.window.tool_actions import TOOLS, ToolActions
from gui_app.ui.workers.supervisor import EngineCommand, RunSupervisor

TAB_NAMES = ["Dataset", "Training", "Replicas", "Evaluation", "Try", "Log"]
STATE_TEXT = {"idle": "Ready", "starting": "Starting the engine (TensorFlow loads in a few seconds)…",
              "running": "Training", "paused": "Paused", "stopping": "Stopping: writing a checkpoint…"}


class MainWindow(QMainWindow):
    def __init__(self, settings: Settings | None = None, runs_dir: str | Path | None = None,
                 engine_command: EngineCommand = default_engine_command) -> None:
        super().__init__()
        self.setWindowTitle("Replica Studio")
        self.setAcceptDrops(True)
        self.settings = settings or load_settings()
        self.runs_dir = resolve_runs_dir(self.settings, runs_dir)
        self.supervisor = RunSupervisor(engine_command, grace_seconds=self.settings.stop_grace_seconds, parent=self)
        self.config_panel = ConfigPanel(engine_command)
        self.preview = DatasetTab()
        self.training_charts = TrainingTab()
        self.replica_charts = ReplicasTab()
        self.evaluation = EvaluationTab()
        self.try_panel = TryTab(engine_command=engine_command)
        self.log = LogTab()
        self.runs = RunsPanel(self.runs_dir)
        self.progress = RunProgress()
        self.tabs = QTabWidget()
        for name, widget in zip(TAB_NAMES, (self.preview, self.training_charts, self.replica_charts,
                                            self.evaluation, self.try_panel, self.log)):
            self.tabs.addTab(widget, name)
        self.actions = WindowActions(self, TAB_NAMES, TOOLS)
        self.shown = ShownRun(self.training_charts, self.replica_charts, self.evaluation, self.progress, self)
        self.models = ModelActions(self, self.shown, self.tabs, self.try_panel, self.settings, engine_command)
        self.files = FileActions(self, shown=self.shown, config_panel=self.config_panel, runs=self.runs,
                                 tabs=self.tabs, dataset_tab=self.preview, models=self.models,
                                 settings=self.settings, runs_dir=self.runs_dir, is_busy=self.supervisor.is_active)
        self.tools = ToolActions(self, self.config_panel, engine_command)
        self._build_layout()
        self.state_label, self.devices_label = QLabel("Ready"), QLabel("Detecting devices…")
        self.statusBar().addWidget(self.state_label, 1)
        self.statusBar().addPermanentWidget(self.devices_label)
        self.failure_box: QMessageBox | None = None
        self.resume_dialog: ResumeDialog | None = None
        self._close_when_stopped = False
        # Background work put off until the run's first step (see _defer_background_work).
        self._deferred_detection = self._deferred_inspection = False
        self._connect()
        self._restore()

    def _build_layout(self) -> None:
        right = QWidget()
        column = QVBoxLayout(right)
        column.setContentsMargins(0, 0, 0, 0)
        column.addWidget(self.progress)
        column.addWidget(self.tabs, 1)
        self.right_splitter = QSplitter(Qt.Orientation.Vertical)
        self.right_splitter.addWidget(right)
        self.right_splitter.addWidget(self.runs)
        self.right_splitter.setStretchFactor(0, 4)
        self.right_splitter.setStretchFactor(1, 1)
        self.splitter = QSplitter(Qt.Orientation.Horizontal)
        self.splitter.addWidget(self.config_panel)
        self.splitter.addWidget(self.right_splitter)
        self.splitter.setStretchFactor(1, 1)
        self.splitter.setChildrenCollapsible(False)
        self.setCentralWidget(self.splitter)

    def _connect(self) -> None:
        a, sup, panel = self.actions, self.supervisor, self.config_panel
        a.train.triggered.connect(self.train)
        a.stop.triggered.connect(sup.stop)
        a.pause.triggered.connect(lambda: sup.resume() if sup.state() == "paused" else sup.pause())
        a.checkpoint.triggered.connect(sup.checkpoint)
        a.resume_run.triggered.connect(lambda: self.resume_run(self.runs.selected_paths()[0]))
        f, m, shown = self.files, self.models, self.shown
        a.new_run.triggered.connect(f.new_run)
        a.open_run.triggered.connect(f.open_run_dialog)
        a.load_config.triggered.connect(f.load_config_dialog)
        a.save_config.triggered.connect(f.save_config_dialog)
        a.quit.triggered.connect(self.close)
        a.about.triggered.connect(lambda: QMessageBox.about(self, "About Replica Studio", self.about_text()))
        a.getting_started.triggered.connect(lambda: GettingStartedDialog(self.runs_dir, self).open())
        a.open_model.triggered.connect(m.try_model_file)
        for tool in TOOLS:
            a.tools[tool.key].triggered.connect(lambda _=False, tool=tool: self.tools.open(tool))
        self.tools.log_line.connect(self.log.append_line)
        for fmt, action in a.export.items():
            action.triggered.connect(lambda _=False, fmt=fmt: m.export_model(fmt))
        for i, action in enumerate(a.tabs):
            action.triggered.connect(lambda _=False, i=i: self.tabs.setCurrentIndex(i))
        shown.changed.connect(self._on_shown_changed)
        shown.note.connect(self.log.note)
        m.note.connect(self.log.note)
        m.log_line.connect(self.log.append_line)
        self.try_panel.log_line.connect(self.log.append_line)
        f.status.connect(self.state_label.setText)
        f.recent_changed.connect(self._fill_recent)
        sup.events.connect(self._on_events)
        sup.run_started.connect(self._on_run_started)
        sup.finished.connect(self._on_finished)
        sup.log_line.connect(self.log.append_line)
        sup.state_changed.connect(self._on_state_changed)
        panel.validity_changed.connect(lambda _: self._update_actions())
        panel.edited.connect(self._remember_config)
        panel.inspect_started.connect(self.preview.set_busy)
        panel.inspected.connect(lambda result, samples: self.preview.show_inspection(result.get("dataset") or {},
                                                                                     samples))
        panel.inspect_failed.connect(self.preview.show_error)
        panel.devices.detected.connect(lambda _: self.devices_label.setText(panel.devices.status.text()))
        panel.devices.detection_failed.connect(self._on_detection_failed)
        self.runs.open_requested.connect(f.open_run)
        self.runs.overlay_requested.connect(f.overlay_runs)
        self.runs.resume_requested.connect(self.resume_run)
        self.runs.export_requested.connect(lambda run_dir: m.export_model("keras", run_dir))
        self.runs.tree.itemSelectionChanged.connect(self._update_actions)
        self.runs.filled.connect(self._update_actions)  # the selected run's status may have changed

    def _restore(self) -> None:
        s = self.settings
        if s.window_geometry:
            self.restoreGeometry(QByteArray.fromBase64(s.window_geometry.encode()))
        else:  # first launch: roomy, but never larger than the screen (a 1366x768 laptop)
            screen = self.screen().availableGeometry()
            self.resize(min(1500, screen.width()), min(940, screen.height()))
        if s.window_state:
            self.restoreState(QByteArray.fromBase64(s.window_state.encode()))
        if s.splitter_state:
            self.splitter.restoreState(QByteArray.fromBase64(s.splitter_state.encode()))
        config = first_launch_config()
        if s.last_config is not None:
            try:
                config = RunConfig.from_dict(s.last_config)
            except ConfigError as exc:
                self.log.note(f"The saved configuration is not usable ({exc}); using the defaults")
        else:
            self.config_panel.prefer_gpus = True  # first launch: mirror over the GPUs if any
        self.config_panel.set_config(config)
        self.config_panel.dataset.last_dir = self.config_panel.model.last_dir = s.last_open_dir or ""
        self.try_panel.last_dir = s.last_export_dir or s.last_open_dir or self.try_panel.last_dir
        self._fill_recent(s.recent_runs)
        self._update_actions()

    def start(self) -> None:
        """Begin the background work (device detection); call once the window is shown."""
        self.config_panel.start_detection()

    def train_at_launch(self) -> None:
        """``--train``: start the run now; device detection (not started yet) and the dataset
        inspection (asked for when the forms were filled) follow its first step."""
        self._deferred_detection = True
        self.train()

    def _defer_background_work(self) -> None:
        """A run starting while device detection or the dataset inspection still runs: stop them
        and run them again once its first step has arrived. Started together, three TensorFlow
        processes share the cores, and the first step came 3x later (docs/benchmarks.md, Start-up)."""
        panel = self.config_panel
        if panel.devices.is_detecting():
            panel.devices.cancel_detection()
            self._deferred_detection = True
        if panel.inspector.is_busy():
            panel.inspector.cancel()
            self._deferred_inspection = True

    def _start_deferred(self) -> None:
        if self._deferred_detection:
            self._deferred_detection = False
            self.start()
        if self._deferred_inspection:
            self._deferred_inspection = False
            self.config_panel.inspector.retry()

    # ---- runs ------------------------------------------------------------------------
    def train(self) -> None:
        config = self.config_panel.config()
        if config is None or self.supervisor.is_active():
            return
        self.shown.clear()
        self.log.note(f"Training {config.dataset.name} with {config.model.name} ({config.strategy.name})")
        self._defer_background_work()
        self.supervisor.start_train(config, self.runs_dir)
        self.tabs.setCurrentWidget(self.training_charts)

    def resume_run(self, run_dir: str, overrides: Sequence[str] | None = None) -> None:
        """Continue a run; a failed one first asks what to change (ResumeDialog), since resuming
        it unchanged would fail the same way."""
        if self.supervisor.is_active():
            return
        info = next((r for r in self.runs.runs() if str(r.path) == str(run_dir)), None)
        if overrides is None and info is not None and info.status == "failed":
            self.resume_dialog = ResumeDialog(info, self)
            self.resume_dialog.accepted.connect(lambda: self.resume_run(run_dir, self.resume_dialog.overrides()))
            self.resume_dialog.open()
            return
        # The history first: the resumed engine appends to the same events.jsonl, and the
        # charts drop any steps after the checkpoint when its run_started arrives.
        self.shown.show_history(run_dir)
        self.log.note(f"Resuming {Path(run_dir).name}")
        self._defer_background_work()
        self.supervisor.start_resume(run_dir, overrides or ())
        self.tabs.setCurrentWidget(self.training_charts)

    def _on_events(self, events: list[Event]) -> None:
        self.shown.add_events(events)
        if (self._deferred_detection or self._deferred_inspection) and any(isinstance(e, Step) for e in events):
            self._start_deferred()
        for event in events:
            if isinstance(event, Error):
                self.log.note(f"Engine error: {event.message}")

    def _on_run_started(self, event: RunStarted) -> None:
        self.shown.set_path(event.run_dir or self.shown.path or "")
        self.runs.set_active_run(self.shown.path)
        if self.shown.path:
            self.files.add_recent(self.shown.path)

    def _on_shown_changed(self, run: str) -> None:
        self.setWindowTitle(f"Replica Studio — {Path(run).name}" if run else "Replica Studio")
        self._update_actions()

    def _fill_recent(self, paths: list[str]) -> None:
        self.actions.fill_recent(paths, self.files.open_run, self.files.clear_recent)

    def _on_finished(self, status: str, run_dir: str, message: str) -> None:
        self._start_deferred()  # a run that ended before its first step
        self.runs.set_active_run(None)
        self.config_panel.set_locked(False)
        text = f"Run {status}" + (f": {message}" if message else "")
        self.state_label.setText(text)
        if status != "completed":  # a completed run keeps its test accuracy on show
            self.progress.set_message(text)
        self.log.note(text)
        if run_dir:
            if status in ("failed", "interrupted") and message:
                self.runs.set_note(run_dir, message)
            self.runs.select(run_dir)
            if status == "completed" and self.shown.has_evaluation():  # drawn when its event came
                self.tabs.setCurrentWidget(self.evaluation)
        self.shown.model_may_have_changed()  # a completed run now has its model.keras
        save_settings(self.settings)
        if self._close_when_stopped:
            QTimer.singleShot(0, self.close)
        elif status in ("failed", "interrupted"):
            self.failure_box = QMessageBox(QMessageBox.Icon.Warning, f"Run {status}",
                                           message or f"The run {status}.", QMessageBox.StandardButton.Ok, self)
            self.failure_box.open()  # window-modal but not blocking: the event loop keeps going

    def _on_state_changed(self, state: str) -> None:
        self.state_label.setText(STATE_TEXT.get(state, state))
        self.config_panel.set_locked(state != "idle")
        self.runs.set_busy(state != "idle")
        self._update_actions()

    def _update_actions(self) -> None:
        selected = self.runs.selected_paths()
        resumable = len(selected) == 1 and any(r.resumable for r in self.runs.runs() if str(r.path) == selected[0])
        self.actions.update(self.supervisor.state(), self.config_panel.is_valid(), resumable,
                            exportable=self.shown.model_run() is not None)

    # ---- settings, about, closing ----------------------------------------------------
    def _remember_config(self) -> None:
        config = self.config_panel.config()
        if config is not None:
            self.settings.last_config = config.to_dict()

    def _on_detection_failed(self, message: str) -> None:
        self.devices_label.setText("Device detection failed")
        self.log.note(f"Device detection failed: {message}")
        # The engine could not start TensorFlow, so nothing can train: say so at once (after
        # this slot returns, as the dialog runs its own event loop).
        QTimer.singleShot(0, lambda: show_tensorflow_unavailable(message, self))

    def about_text(self) -> str:
        devices = self.config_panel.devices
        error = None if devices.info else devices.status.text() if "failed" in devices.status.text() else None
        return about_html(devices.info, error)

    def save_window_settings(self) -> None:
        s = self.settings
        s.window_geometry = bytes(self.saveGeometry().toBase64()).decode()
        s.window_state = bytes(self.saveState().toBase64()).decode()
        s.splitter_state = bytes(self.splitter.saveState().toBase64()).decode()
        s.last_open_dir = self.config_panel.dataset.last_dir or s.last_open_dir
        save_settings(s)

    def _confirm_close(self) -> bool:
        answer = QMessageBox.question(
            self, "A run is in progress",
            "Stop the run and close Replica Studio?\nThe run is checkpointed and can be resumed later.",
            QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No, QMessageBox.StandardButton.No)
        return answer == QMessageBox.StandardButton.Yes

    def close_without_asking(self) -> None:
        """Close, stopping a run without the question (termination signals)."""
        if self.supervisor.is_active() and not self._close_when_stopped:
            self._close_when_stopped = True
            self.supervisor.stop()
        self.close()

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802 (Qt override)
        if self.supervisor.is_active():
            event.ignore()
            if self._close_when_stopped:
                return  # already stopping; the window closes when the engine has finished
            if self.settings.confirm_close_during_run and not self._confirm_close():
                return
            # Cooperative stop; the supervisor kills the engine after its grace period, and
            # _on_finished closes the window then.
            self._close_when_stopped = True
            self.state_label.setText("Stopping the run before closing…")
            self.supervisor.stop()
            return
        self.save_window_settings()
        self.models.close()
        self.tools.close()
        self.config_panel.inspector.cancel()
        self.config_panel.devices.cancel_detection()
        self.runs.stop_reading()
        self.supervisor.close()
        event.accept()

    # ---- drag and drop: anywhere on the window ---------------------------------------
    def dragEnterEvent(self, event: QDragEnterEvent) -> None:  # noqa: N802 (Qt override)
        if event.mimeData().hasUrls() and any(u.isLocalFile() for u in event.mimeData().urls()):
            event.acceptProposedAction()

    def dropEvent(self, event: QDropEvent) -> None:  # noqa: N802 (Qt override)
        paths = [u.toLocalFile() for u in event.mimeData().urls() if u.isLocalFile()]
        self.files.drop(paths)
        if paths:
            event.acceptProposedAction()
