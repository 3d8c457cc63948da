"""The window's actions, menus and toolbar, and which of them apply.

They follow the window's state (gui_app.ui.window.window_state): the run state, whether the
forms are valid, the runs selected in the run list and the run on screen. Actions that do not
apply are disabled, never hidden, so the menus always look the same. The View menu's entries
show a tab by setting the state's tab.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QMainWindow, QMenu, QStyle, QToolBar

from gui_app.core.formats import FORMATS
from gui_app.core.ssh_hosts import split_run_key
from gui_app.ui.window.run_rows import bundle_resume_tip
from gui_app.ui.window.window_state import PAUSED, RUNNING, STARTING, TABS, WindowState

if TYPE_CHECKING:
    from gui_app.ui.window.tool_actions import Tool

TRAIN_TIP = "Start training with this configuration (Ctrl+R)"
RESUME_TIP = "Continue the stopped or interrupted run selected in the run list"


class WindowActions:
    def __init__(self, window: QMainWindow, state: WindowState, tools: Sequence[Tool],
                 report_run: Callable[[], str | None] = lambda: None) -> None:
        self._window, self._state = window, state
        self._report_run = report_run
        self._tools = tuple(tools)
        icon = window.style().standardIcon
        pixmap = QStyle.StandardPixmap

        def act(text: str, shortcut: str | QKeySequence.StandardKey | None = None, tip: str = "",
                standard_icon: QStyle.StandardPixmap | None = None) -> QAction:
            action = QAction(text, window)
            if shortcut is not None:
                action.setShortcut(QKeySequence(shortcut))
            if standard_icon is not None:
                action.setIcon(icon(standard_icon))
            if tip:
                action.setToolTip(tip)
                action.setStatusTip(tip)
            return action

        self.new_run = act("&New run", QKeySequence.StandardKey.New, "Clear the charts and start from the defaults")
        self.open_run = act("&Open run…", QKeySequence.StandardKey.Open, "Show a past run's charts and evaluation",
                            pixmap.SP_DirOpenIcon)
        self.open_bundle = act("Open run &bundle…", tip="Open a run bundle (replica-studio bundle): checked against "
                               "its manifest, then shown as a copy of the run")
        self.save_report = act("Save &report…", tip="Write the run selected in the run list (else the run on screen) "
                               "as one HTML file that opens offline in any browser")
        self.export_mlflow = act("Export run to &MLflow…", tip="Write the run selected in the run list (else the run "
                                 "on screen) to an MLflow tracking folder or server (needs the [mlflow] extra)")
        self.load_config = act("&Load configuration…", "Ctrl+L", "Fill the forms from a run configuration (JSON)")
        self.save_config = act("&Save configuration…", QKeySequence.StandardKey.Save,
                               "Write the current run configuration to a JSON file", pixmap.SP_DialogSaveButton)
        self.quit = act("&Quit", QKeySequence.StandardKey.Quit)
        self.train = act("&Train", "Ctrl+R", TRAIN_TIP, pixmap.SP_MediaPlay)
        self.pause = act("&Pause", "Ctrl+P", "Pause the run after the current step group (Ctrl+P)",
                         pixmap.SP_MediaPause)
        self.stop = act("&Stop", "Ctrl+.", "Stop the run: checkpoint, no evaluation (Ctrl+.)", pixmap.SP_MediaStop)
        self.submit_slurm = act("Submit to S&lurm…", tip="Submit the multi-worker run on the forms to a Slurm "
                                "cluster (sbatch here or on a login node) and follow it")
        self.submit_kubernetes = act("Submit to &Kubernetes…")  # its tips: KubernetesActions (why it is off)
        self.checkpoint = act("Save a &checkpoint now", "Ctrl+K", "Write a checkpoint without stopping")
        self.notify = act("&Notify when a run or sweep ends", tip="A desktop notification when a run or a sweep "
                          "completes, stops or fails while the window is not the active one")
        self.notify.setCheckable(True)
        self.resume_run = act("&Resume selected run", "Ctrl+Shift+R", RESUME_TIP, pixmap.SP_MediaSeekForward)
        self.attach_run = act("&Attach to selected run", tip="Follow the run selected in the run list, which runs "
                              "without this window: its charts, Stop, Pause and Continue")
        self.compare_runs = act("C&ompare selected runs…", tip="The runs selected in the run list side by side: "
                                "the settings that differ, their final figures and curves")
        self.open_model = act("Try a &model file…", "Ctrl+Shift+O",
                              "Open an exported .keras, SavedModel, .tflite or .onnx model in the Try tab")
        # One entry per format; each opens the export dialog for the run on screen.
        self.export = {name: act(f"{spec.label}…") for name, spec in FORMATS.items()}
        # The Tools menu, one entry per tool (gui_app.ui.window.tool_actions.TOOLS).
        self.tools = {tool.key: act(tool.label, tip=tool.tip) for tool in self._tools}
        self.new_sweep = act("New s&weep…", tip="Train many runs of the configuration on the forms with the settings "
                             "you choose varied, and keep the best (Optuna)")
        self.open_sweep = act("&Open sweep…", tip="Follow a sweep's trials, charts and best run")
        self.hosts = act("&Hosts…", tip="The SSH hosts the window can run on: add, change, remove, test the connection")
        self.getting_started = act("&Getting started", QKeySequence.StandardKey.HelpContents,
                                   "What each panel does, where runs are stored, TensorBoard")
        self.about = act("&About Replica Studio")
        self.tabs = [act(f"&{name}", f"Ctrl+{i + 1}") for i, name in enumerate(TABS)]
        for name, action in zip(TABS, self.tabs):
            action.triggered.connect(lambda _=False, name=name: state.set_tab(name))

        bar = window.menuBar()
        file_menu = bar.addMenu("&File")
        file_menu.addActions([self.new_run, self.open_run])
        self.recent_menu = QMenu("Recent &runs", window)
        file_menu.addAction(self.open_bundle)
        file_menu.addMenu(self.recent_menu)
        file_menu.addActions([self.save_report, self.export_mlflow])
        file_menu.addSeparator()
        file_menu.addAction(self.open_model)
        file_menu.addSeparator()
        file_menu.addActions([self.load_config, self.save_config])
        file_menu.addSeparator()
        file_menu.addAction(self.quit)
        run_menu = bar.addMenu("&Run")
        run_menu.setToolTipsVisible(True)  # a Submit entry that is off says why in its tooltip
        run_menu.addActions([self.train, self.pause, self.stop, self.checkpoint])
        run_menu.addSeparator()
        run_menu.addAction(self.submit_slurm)  # enabled by SlurmActions (it needs a multi-worker config)
        run_menu.addAction(self.submit_kubernetes)  # enabled by KubernetesActions (kubectl, multi_worker_mirrored)
        run_menu.addSeparator()
        run_menu.addActions([self.resume_run, self.attach_run, self.compare_runs])
        run_menu.addSeparator()
        run_menu.addAction(self.notify)
        self.export_menu = bar.addMenu("&Export")
        self.export_menu.setToolTipsVisible(True)
        self.export_menu.addActions(list(self.export.values()))
        tools_menu = bar.addMenu("&Tools")
        tools_menu.addActions(list(self.tools.values()))
        tools_menu.addSeparator()
        tools_menu.addActions([self.new_sweep, self.open_sweep])
        tools_menu.addSeparator()
        tools_menu.addAction(self.hosts)
        view_menu = bar.addMenu("&View")
        view_menu.addActions(self.tabs)
        bar.addMenu("&Help").addActions([self.getting_started, self.about])

        self.toolbar = QToolBar("Run", window)
        self.toolbar.setObjectName("run-toolbar")  # saveState() needs a name
        self.toolbar.setMovable(False)
        self.toolbar.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.toolbar.addActions([self.train, self.pause, self.stop])
        self.toolbar.addSeparator()
        self.toolbar.addActions([self.open_run, self.save_config])
        window.addToolBar(self.toolbar)
        for signal in (state.run_state_changed, state.forms_valid_changed, state.train_blocker_changed,
                       state.selection_changed, state.shown_run_changed):
            signal.connect(self._update)
        self._update()

    def _update(self) -> None:
        """Enable what applies: one run at a time; Train once the forms are valid and their
        dataset and model check passed; forms and files only while idle; exports when the run
        selected in the run list (else the run on screen) has a trained model or, stopped early, a
        checkpoint (an export does not disturb a training run: it reads another run's files)."""
        state = self._state.run_state
        idle, config_valid = self._state.is_idle(), self._state.forms_valid
        blocker = self._state.train_blocker
        live = state in (RUNNING, PAUSED)
        self.train.setEnabled(idle and not blocker)
        # The status tip too: a menu entry that is off must not say "Start training" in the status bar.
        train_tip = (blocker or TRAIN_TIP) if idle else f"{TRAIN_TIP} (one run at a time: a run is active)"
        self.train.setToolTip(train_tip)
        self.train.setStatusTip(train_tip)
        self.pause.setEnabled(live)
        self.pause.setText("&Continue" if state == PAUSED else "&Pause")
        self.stop.setEnabled(state in (STARTING, RUNNING, PAUSED))
        self.checkpoint.setEnabled(live)
        self.resume_run.setEnabled(self._state.resumable_selection() is not None)
        one = self._state.selection[0] if len(self._state.selection) == 1 else None
        # A bundle's run: what it holds decides, and the entry says so (runs_panel.bundle_resume_tip).
        resume_tip = bundle_resume_tip(one.info, one.resumable) if one is not None and one.bundle else RESUME_TIP
        self.resume_run.setToolTip(resume_tip)
        self.resume_run.setStatusTip(resume_tip)
        self.attach_run.setEnabled(self._state.attachable_selection() is not None)
        self.compare_runs.setEnabled(len(self._state.selection) >= 2)
        readable = self._report_run() is not None
        self.save_report.setEnabled(readable)  # it reads files only: a run may train
        self.export_mlflow.setEnabled(readable)  # likewise (a run exported mid-training is replaced when next exported)
        for action in (self.new_run, self.open_run, self.open_bundle, self.load_config, self.recent_menu.menuAction()):
            action.setEnabled(idle)
        self.save_config.setEnabled(config_valid)
        # A tool's engine process would compete with a run for the same cores or GPUs (and a
        # benchmark would measure nothing useful).
        for tool in self._tools:
            self.tools[tool.key].setEnabled(idle and (config_valid or not tool.needs_valid_config))
        self.new_sweep.setEnabled(config_valid)  # the forms are its base; it runs beside the window
        # The run selected in the run list, else the one on screen; named, or why there is none.
        run, why_not = self._state.export_choice()
        host, there = split_run_key(run or "")
        for name, action in self.export.items():
            action.setEnabled(run is not None)
            tip = (f"Export {Path(there).name}{f' on {host}' if host else ''} as {FORMATS[name].label}"
                   if run is not None else why_not)
            action.setToolTip(tip)
            action.setStatusTip(tip)

    def fill_recent(self, paths: list[str], on_open: Callable[[str], object], on_clear: Callable[[], object]) -> None:
        self.recent_menu.clear()
        existing = [p for p in paths if Path(p).is_dir()]
        for path in existing:
            action = self.recent_menu.addAction(Path(path).name)
            action.setToolTip(path)
            action.triggered.connect(lambda _=False, p=path: on_open(p))
        if not existing:
            self.recent_menu.addAction("No recent runs").setEnabled(False)
        self.recent_menu.addSeparator()
        self.recent_menu.addAction("Clear the list", on_clear).setEnabled(bool(existing))
