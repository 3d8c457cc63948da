"""MainWindow: lays out the panels and composes the objects that run them; it computes nothing itself.

Left: the ConfigPanel (devices, dataset, model, strategy, hyperparameters). Right: the run's
progress, the tabs (Dataset, Training, Replicas, Evaluation, Try, Log) and the run list. The
RunSupervisor runs the engine; its batched events feed the charts and the progress line.

What the window is in lives in one place, ``state`` (:class:`WindowState`: the run state, the
active run, the run on screen, the selected runs, whether the forms are valid, the tab, the status
line), and the views subscribe to it: the menus and toolbar (``actions``, :class:`WindowActions`),
the run list, the tab widget, the title and the status bar. The objects with one job each, composed
here: ``shown`` (:class:`ShownRun`, draws the run on screen), ``run`` (:class:`RunActions`, train,
resume, pause, and what a run's end shows), ``models`` (:class:`ModelActions`, the Export menu and
the Try tab), ``files`` (:class:`FileActions`, open, drop, load, save) and ``tools``
(:class:`ToolActions`, the Tools menu's dialogs), ``sweeps`` (:class:`SweepActions`, New sweep, Open
sweep and their views). Every engine process -- training, devices,
inspection, export, prediction -- is built by the same ``engine_command``; ``place``
(:class:`RunPlace`, the toolbar's "Run on" list) sets ``state.run_on`` and adds ``--host`` to
devices and inspection when they run on an SSH host; Train and the run list read ``state.run_on``.
"""
from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QByteArray, QSize, Qt, QTimer
from PySide6.QtGui import QCloseEvent, QDragEnterEvent, QDropEvent
from PySide6.QtWidgets import QLabel, QMainWindow, QMessageBox, QSplitter, QTabWidget, QVBoxLayout, QWidget

from gui_app.core.answers import Finding
from gui_app.core.config import ConfigError, RunConfig
from gui_app.core.ssh_hosts import Host, HostsFileError, find_host, split_run_key
from gui_app.identity import app_command as default_engine_command
from gui_app.ui.config.config_panel import ConfigPanel, first_launch_config
from gui_app.ui.dialogs.about import about_html
from gui_app.ui.dialogs.close_run import KEEP, STOP, ask_close_during_run
from gui_app.ui.dialogs.getting_started import GettingStartedDialog
from gui_app.ui.dialogs.hosts import HostsDialog
from gui_app.ui.labels import ElidedLabel
from gui_app.ui.notifications import DesktopNotifier, RunNotifications
from gui_app.ui.screen_fit import ScreenFit
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
from gui_app.ui.window.finding_banner import FindingBanner
from gui_app.ui.window.kubernetes_actions import KubernetesActions
from gui_app.ui.window.mlflow_actions import MlflowActions
from gui_app.ui.window.model_actions import ModelActions
from gui_app.ui.window.remote_runs import RemoteOpen
from gui_app.ui.window.report_actions import ReportActions
from gui_app.ui.window.run_actions import RunActions
from gui_app.ui.window.run_attach import RunAttach
from gui_app.ui.window.run_place import RunOnBox, RunPlace
from gui_app.ui.window.run_progress import RunProgress
from gui_app.ui.window.runs_panel import RunsPanel
from gui_app.ui.window.shown_run import ShownRun
from gui_app.ui.window.slurm_actions import SlurmActions
from gui_app.ui.window.stall_watch import StallWatch
from gui_app.ui.window.sweep_actions import SweepActions
from gui_app.ui.window.tool_actions import TOOLS, ToolActions
from gui_app.ui.window.window_state import IDLE, TABS, WindowState
from gui_app.ui.workers.supervisor import EngineCommand, RunSupervisor


class MainWindow(QMainWindow):
    def __init__(self, settings: Settings | None = None, runs_dir: str | Path | None = None,
                 engine_command: EngineCommand = default_engine_command) -> None:
        super().__init__()
        self.setAcceptDrops(True)
        self.settings = settings or load_settings()
        self.supervisor = RunSupervisor(engine_command, grace_seconds=self.settings.stop_grace_seconds, parent=self)
        self.state = WindowState(self.supervisor, resolve_runs_dir(self.settings, runs_dir), self)
        self.place = RunPlace(engine_command, self.state, self.settings.run_on, self)
        self._engine_command = engine_command
        self.hosts_dialog: HostsDialog | None = None
        self.config_panel = ConfigPanel(self.place.command, failed_host=self.place.failed_host)
        self.dataset_tab, self.training_tab, self.replicas_tab = DatasetTab(), TrainingTab(), ReplicasTab()
        self.evaluation_tab, self.try_tab = EvaluationTab(), TryTab(engine_command=engine_command)
        self.log_tab = LogTab()
        self.runs = RunsPanel(self.state)  # it lists the runs where state.run_on says
        self.progress = RunProgress(self.state)
        self.banner = FindingBanner()  # the run's diagnosis, over the tabs
        self.tabs = QTabWidget()
        for name, widget in zip(TABS, (self.dataset_tab, self.training_tab, self.replicas_tab, self.evaluation_tab,
                                       self.try_tab, self.log_tab)):
            self.tabs.addTab(widget, name)
        self.reports = ReportActions(self, self.state, self.settings, engine_command)
        self.mlflow = MlflowActions(self, self.state, self.settings, engine_command, self.reports.report_run)
        self.window_actions = WindowActions(self, self.state, TOOLS, self.reports.report_run)
        self.shown = ShownRun(self.state, self.training_tab, self.replicas_tab, self.evaluation_tab, self.progress,
                              self, banner=self.banner)
        self.stall_watch = StallWatch(self.state, self.shown, self)
        self.run = RunActions(self, self.state, supervisor=self.supervisor, forms=self.config_panel, shown=self.shown)
        self.attach = RunAttach(self.state, supervisor=self.supervisor, shown=self.shown, runs=self.runs, parent=self)
        self.remote_open = RemoteOpen(self.state, self.shown, self)
        self.models = ModelActions(self, self.state, self.try_tab, self.settings, engine_command)
        self.files = FileActions(self, self.state, shown=self.shown, forms=self.config_panel, models=self.models,
                                 settings=self.settings)
        self.tools = ToolActions(self, self.config_panel, engine_command)
        self.slurm = SlurmActions(self, self.state, self.window_actions.submit_slurm, supervisor=self.supervisor,
                                  forms=self.config_panel, shown=self.shown, runs=self.runs,
                                  engine_command=engine_command)
        self.kubernetes = KubernetesActions(self, self.state, self.window_actions.submit_kubernetes,
                                            supervisor=self.supervisor, forms=self.config_panel, shown=self.shown,
                                            runs=self.runs, engine_command=engine_command)
        self.notifications = RunNotifications(self, DesktopNotifier(self.windowIcon(), self),
                                              self.settings.notify_when_run_ends, non_finite=self._non_finite)
        self.sweeps = SweepActions(self, self.state, forms=self.config_panel, files=self.files, models=self.models,
                                   notifications=self.notifications, engine_command=engine_command)
        self._build_layout()
        # Elided, not wrapped: "Run failed: <the engine's message>" must not widen the window.
        self.state_label, self.devices_label = ElidedLabel(self.state.status), ElidedLabel("Detecting devices…")
        self.statusBar().addWidget(self.state_label, 1)
        self.statusBar().addPermanentWidget(self.devices_label)
        self._connect()
        self._restore()

    def _build_layout(self) -> None:
        right = QWidget()
        column = QVBoxLayout(right)
        column.setContentsMargins(0, 0, 0, 0)
        column.addWidget(self.progress)
        column.addWidget(self.banner)
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
        self.run_on = RunOnBox(self.place)
        self.window_actions.toolbar.addSeparator()
        self.window_actions.toolbar.addWidget(QLabel(" Run on "))
        self.window_actions.toolbar.addWidget(self.run_on)

    def _connect(self) -> None:
        a, state, panel, log = self.window_actions, self.state, self.config_panel, self.log_tab
        # The views that follow the state.
        state.status_changed.connect(self.state_label.setText)
        state.shown_run_changed.connect(self._show_title)
        state.tab_changed.connect(lambda tab: self.tabs.setCurrentIndex(TABS.index(tab)))
        self.tabs.currentChanged.connect(lambda index: state.set_tab(TABS[index]))
        state.run_state_changed.connect(lambda run_state: panel.set_locked(run_state != IDLE))
        state.run_state_changed.connect(lambda run_state: self.run_on.setEnabled(run_state == IDLE))
        state.run_on_changed.connect(self._on_place_changed)
        state.run_ended.connect(lambda *_: save_settings(self.settings))  # the recent runs, the last config
        state.run_ended.connect(self.notifications.on_run_ended)
        self.stall_watch.stalled.connect(self.notifications.on_stalled)
        panel.validity_changed.connect(state.set_forms_valid)
        state.set_forms_valid(panel.is_valid())
        panel.readiness_changed.connect(state.set_train_blocker)
        state.set_train_blocker(panel.train_blocker())
        # The menus and toolbar.
        r, f, m, sup = self.run, self.files, self.models, self.supervisor
        a.train.triggered.connect(r.train)
        a.pause.triggered.connect(r.pause_or_continue)
        a.stop.triggered.connect(sup.stop)
        a.checkpoint.triggered.connect(sup.checkpoint)
        a.resume_run.triggered.connect(r.resume_selected)
        a.attach_run.triggered.connect(self.attach.attach_selected)
        a.compare_runs.triggered.connect(f.compare_selected)
        a.notify.setChecked(self.settings.notify_when_run_ends)
        a.notify.toggled.connect(self._set_notify)
        a.new_run.triggered.connect(f.new_run)
        a.open_run.triggered.connect(f.open_run_dialog)
        a.save_report.triggered.connect(self.reports.save_report_dialog)
        a.export_mlflow.triggered.connect(self.mlflow.export_dialog)
        a.open_bundle.triggered.connect(f.open_bundle_dialog)
        a.load_config.triggered.connect(f.load_config_dialog)
        a.save_config.triggered.connect(f.save_config_dialog)
        a.quit.triggered.connect(self.close)
        a.about.triggered.connect(lambda: QMessageBox.about(self, "About Replica Studio", self.about_text()))
        a.getting_started.triggered.connect(lambda: GettingStartedDialog(state.runs_dir, self).open())
        a.hosts.triggered.connect(self.open_hosts)
        a.open_model.triggered.connect(m.try_model_file)
        for tool in TOOLS:
            a.tools[tool.key].triggered.connect(lambda _=False, tool=tool: self.tools.open(tool))
        a.new_sweep.triggered.connect(self.sweeps.new_sweep)
        a.open_sweep.triggered.connect(self.sweeps.open_sweep_dialog)
        for fmt, action in a.export.items():
            action.triggered.connect(lambda _=False, fmt=fmt: m.export_model(fmt))
        f.recent_changed.connect(self._fill_recent)
        # The run list's buttons.
        self.runs.open_requested.connect(self.open_run)
        self.runs.overlay_requested.connect(f.overlay_runs)
        self.runs.compare_requested.connect(f.compare_runs)
        self.sweeps.open_run.connect(self.open_run)
        self.runs.resume_requested.connect(r.resume_run)
        f.bundles.listed.connect(self.runs.add_bundle)  # an opened bundle: a row of the run list
        self.runs.export_requested.connect(lambda run_dir: m.export_model("keras", run_dir))
        # The Log tab.
        for noting in (r, self.attach, self.shown, m, self.remote_open, self.slurm, self.kubernetes):
            noting.note.connect(log.note)
        for logging in (sup, m, self.tools, self.try_tab, self.sweeps, self.slurm, self.kubernetes, self.reports,
                        self.mlflow):
            logging.log_line.connect(log.append_line)
        # The forms' own work: the dataset inspection, device detection.
        panel.edited.connect(self._remember_config)
        panel.inspect_started.connect(self.dataset_tab.set_busy)
        panel.inspected.connect(lambda result, samples: self.dataset_tab.show_inspection(result.get("dataset") or {},
                                                                                         samples))
        panel.inspect_failed.connect(self.dataset_tab.show_error)
        panel.inspect_cleared.connect(self.dataset_tab.clear)
        panel.devices.detected.connect(lambda _: self.devices_label.setText(panel.devices.status.text()))
        panel.devices.detection_failed.connect(self._on_detection_failed)
        # The Run on host's own failure, met by the dataset check or the run list: told whole on the
        # Devices section (where detection, which meets it too, would say it), the others point there.
        for failing in (panel, self.runs):
            failing.host_failed.connect(panel.devices.show_problem)

    def _restore(self) -> None:
        s = self.settings
        # First launch: roomy, but never larger than the screen with the title bar (a 1280x720
        # laptop); a restored geometry is kept inside the screen it opens on (one that shrank).
        self.screen_fit = ScreenFit(self, None if s.window_geometry else QSize(1500, 940))
        if s.window_geometry:
            self.restoreGeometry(QByteArray.fromBase64(s.window_geometry.encode()))
        if s.window_state:
            self.restoreState(QByteArray.fromBase64(s.window_state.encode()))
        if s.splitter_state:
            self.splitter.restoreState(QByteArray.fromBase64(s.splitter_state.encode()))
        config, checked = first_launch_config(), False
        if s.last_config is not None:
            try:
                config, checked = RunConfig.from_dict(s.last_config), s.last_config_checked
            except ConfigError as exc:
                self.log_tab.note(f"The saved configuration is not usable ({exc}); using the defaults")
        else:
            self.config_panel.prefer_gpus = True  # first launch: mirror over the GPUs if any
        self.config_panel.set_config(config, checked=checked)
        self.config_panel.dataset.last_dir = self.config_panel.model.last_dir = s.last_open_dir or ""
        self.try_tab.last_dir = s.last_export_dir or s.last_open_dir or self.try_tab.last_dir
        self._fill_recent(s.recent_runs)
        self._show_title("")

    def start(self) -> None:
        """Begin the background work (device detection); call once the window is shown."""
        self.config_panel.start_detection()

    def _show_title(self, run: str) -> None:
        self.setWindowTitle(f"Replica Studio — {Path(run).name}" if run else "Replica Studio")

    def _fill_recent(self, paths: list[str]) -> None:
        self.window_actions.fill_recent(paths, self.files.open_run, self.files.clear_recent)

    # ---- settings, about, closing ----------------------------------------------------
    def _remember_config(self) -> None:
        """Only a config that passed its checks is kept (never a half-typed path): the next
        launch starts from it, checked."""
        config = self.config_panel.checked_config()
        if config is not None:
            self.settings.last_config, self.settings.last_config_checked = config.to_dict(), True

    def open_hosts(self) -> HostsDialog:
        """Tools -> Hosts…: window-modal, not blocking; the Run on list follows what it saves."""
        self.hosts_dialog = HostsDialog(self._engine_command, self)
        self.hosts_dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        self.hosts_dialog.changed.connect(self.run_on.refill)
        self.hosts_dialog.destroyed.connect(lambda: setattr(self, "hosts_dialog", None))
        self.hosts_dialog.open()
        return self.hosts_dialog

    def open_run(self, key: str) -> None:
        """Open a run of the run list: from its folder here, or replayed from its host."""
        host_name, run_dir = split_run_key(key)
        if host_name is None:
            self.files.open_run(key)
            return
        try:
            self.remote_open.open(find_host(host_name), run_dir)
        except HostsFileError as exc:
            self.state.set_status(str(exc))

    def _on_place_changed(self, host: Host | None) -> None:
        """Run on another host (or here): its devices and the dataset check come from there (the
        run list follows the state itself)."""
        self.settings.run_on = host.name if host is not None else None
        save_settings(self.settings)
        self.devices_label.setText(f"Detecting devices on {host.name}…" if host is not None
                                   else "Detecting devices…")
        self.config_panel.place_changed()

    def _non_finite(self, run_dir: str) -> Finding | None:
        """The non-finite finding of ``run_dir`` when it is the run on screen."""
        history = self.shown.history
        same = bool(run_dir) and history.run_dir is not None and Path(history.run_dir) == Path(run_dir)
        return history.findings.non_finite if same else None

    def _set_notify(self, on: bool) -> None:
        self.settings.notify_when_run_ends = self.notifications.enabled = on
        save_settings(self.settings)

    def _on_detection_failed(self, message: str) -> None:
        self.devices_label.setText("Device detection failed")
        self.log_tab.note(f"Device detection failed: {message}")
        if self.state.run_on is not None:  # the host's problem (shown on the Devices section), not this computer's
            return
        # The engine could not start TensorFlow, so nothing can train: say so at once (after
        # this slot returns, as the dialog runs its own event loop).
        QTimer.singleShot(0, lambda: show_tensorflow_unavailable(message, self))

    def about_text(self) -> str:
        devices = self.config_panel.devices
        error = None if devices.info else devices.status.text() if "failed" in devices.status.text() else None
        return about_html(devices.info, error)

    def save_window_settings(self) -> None:
        s = self.settings
        s.window_geometry = bytes(self.saveGeometry().toBase64().data()).decode()
        s.window_state = bytes(self.saveState().toBase64().data()).decode()
        s.splitter_state = bytes(self.splitter.saveState().toBase64().data()).decode()
        s.last_open_dir = self.config_panel.dataset.last_dir or s.last_open_dir
        save_settings(s)

    def close_without_asking(self) -> None:
        """Close, stopping a run without the question (termination signals)."""
        if not self.state.is_idle() and not self.run.closing:
            self.run.stop_to_close()
        self.close()

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802 (Qt override)
        if not self.state.is_idle():
            if self.run.closing:
                event.ignore()
                return  # already stopping; the window closes when the engine has finished
            answer = ask_close_during_run(self) if self.settings.confirm_close_during_run else KEEP
            if answer != KEEP:
                event.ignore()
                if answer == STOP:
                    self.run.stop_to_close()  # the window closes when the run has ended
                return
            # KEEP: the window closes now; closing the supervisor lets go of the run, which goes on.
        self.save_window_settings()
        self.models.close()
        self.reports.close()
        self.mlflow.close()
        self.files.bundles.close()
        self.tools.close()
        self.sweeps.close()
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
