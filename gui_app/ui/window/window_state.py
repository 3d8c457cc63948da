"""WindowState: what the window is in, each part known once, with a signal when a part changes.

napari's ``ViewerModel`` is the model: the widgets do not push state into one another; whoever
changes a part changes it here, and the views subscribe to the parts they show.

    run_state    idle | starting | running | paused | stopping: the RunSupervisor's own, read
                 through it (the one object that runs the engine tracks it; nothing keeps a copy)
    active_run   the folder of the run the engine works on (None until its run_started says where)
    run_ended    (status, run_dir, message) when a run has ended, after active_run is cleared
    shown_run    the run on screen (ShownRun draws it; None: none, or a live run that has not said
                 where yet) and whether it has a trained model (:meth:`WindowState.model_run`)
    selection    the runs selected in the run list, as the list read them (:class:`ListedRun`)
    listed_runs  how many runs the run list shows (the progress line invites to open one)
    forms_valid  whether the forms describe a valid RunConfig
    train_blocker  why Train cannot start with the forms ("" when it can): a field is not valid, or
                 the check of the dataset and model on the forms has not passed (ConfigPanel)
    tab          the tab on show (``TABS``)
    run_on       where Train, device detection, the dataset check and the run list go now: an SSH
                 host of hosts.json (its entry as it was read when chosen), or None for this computer;
                 the toolbar's Run on list sets it (RunPlace), everything else reads it here
    status       the status bar's line (each run state has its own until something else is said); a
                 line about the run on screen (:meth:`WindowState.set_run_status`: how it ended) goes
                 when another run comes on screen or the user turns to something else
                 (:meth:`WindowState.clear_run_status`: an export, the Try tab)

``runs_dir``, the folder of run directories, is fixed for the window's life.

Who subscribes: the menus and toolbar (WindowActions: what is enabled), the run list (RunsPanel:
busy, the active run, why a run ended, the Run on host's runs), the progress line (RunProgress: the run state, the runs
listed), the tab widget, the title and the status bar (MainWindow), the Try tab's model
(ModelActions), the recent runs (FileActions); the Run on list, the settings, device detection and
the dataset check (MainWindow, ConfigPanel through RunPlace.command) and Train (RunActions) follow
``run_on``. Resume, Open, Attach, the Log tab, the gallery and the Try tab do not: they act on a run
that lives where its key says (``HOST:RUN_DIR``), whatever Run on says now.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from PySide6.QtCore import QObject, Signal

from gui_app.core.events import RunStarted
from gui_app.core.live_runs import RunProcess
from gui_app.core.rundir import MODEL_FILE, RunInfo, has_checkpoint
from gui_app.core.ssh_hosts import Host, split_run_key
from gui_app.ui.workers.supervisor import IDLE, PAUSED, RUNNING, STARTING, STOPPING

if TYPE_CHECKING:
    from gui_app.ui.workers.supervisor import RunSupervisor

TABS = DATASET, TRAINING, REPLICAS, EVALUATION, TRY, LOG = (
    "Dataset", "Training", "Replicas", "Evaluation", "Try", "Log")
NOTHING_TO_EXPORT = "Select a run with a trained model in the run list (or open one) first"
STATE_TEXT = {IDLE: "Ready", STARTING: "Starting the engine (TensorFlow loads in a few seconds)…",
              RUNNING: "Training", PAUSED: "Paused", STOPPING: "Stopping: writing a checkpoint…"}


@dataclass(frozen=True)
class ListedRun:
    """A run as the run list read it; ``resumable`` was checked there, off the GUI thread (it
    stats the run's folder), and so was ``process``: the process running it now, if any."""

    info: RunInfo
    resumable: bool
    process: RunProcess | None = None
    job_active: bool = False  # its Slurm or Kubernetes job pending or running (gui_app/core/backends)
    bundle: str = ""  # a run bundle opened in the window: the bundle's path (the row is its temporary copy)

    @property
    def running(self) -> bool:
        return self.process is not None or self.job_active

    @property
    def path(self) -> str:
        return str(self.info.path)


class WindowState(QObject):
    run_state_changed = Signal(str)
    active_run_changed = Signal(str)  # "" when no run is active
    run_ended = Signal(str, str, str)  # status, run_dir, message (RunSupervisor.finished)
    shown_run_changed = Signal(str)  # "" when none is shown
    selection_changed = Signal(list)  # of ListedRun
    listed_runs_changed = Signal(int)
    forms_valid_changed = Signal(bool)
    train_blocker_changed = Signal(str)
    tab_changed = Signal(str)
    run_on_changed = Signal(object)  # the Host, or None for this computer
    status_changed = Signal(str)

    def __init__(self, run: RunSupervisor, runs_dir: str | Path, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.runs_dir = Path(runs_dir)
        self._run = run
        self._active_run: str | None = None
        self._shown_run: str | None = None
        self._shown_has_model = False
        self._selection: tuple[ListedRun, ...] = ()
        self._listed_runs = 0
        self._forms_valid = False
        self._train_blocker = "The forms are not filled in yet"
        self._tab = TABS[0]
        self._run_on: Host | None = None
        self._status = STATE_TEXT[run.state()]
        self._status_of_run = False  # the status line is about the run shown when it was said...
        self._status_run: str | None = None  # ... this one (None: no run was on screen)
        run.state_changed.connect(self._on_run_state)
        run.run_started.connect(self._on_run_started)
        run.finished.connect(self._on_run_finished)

    # ---- the run -------------------------------------------------------------------------------
    @property
    def run_state(self) -> str:
        return self._run.state()

    def is_idle(self) -> bool:
        """No run is active: forms, files and tools are open (one run at a time)."""
        return self._run.state() == IDLE

    @property
    def active_run(self) -> str | None:
        return self._active_run

    def _on_run_state(self, state: str) -> None:
        self.set_status(STATE_TEXT.get(state, state))
        self.run_state_changed.emit(state)

    def _on_run_started(self, event: RunStarted) -> None:
        self._set_active_run(event.run_dir or self._shown_run)  # a resumed run is on screen already

    def _on_run_finished(self, status: str, run_dir: str, message: str) -> None:
        self._set_active_run(None)
        self._check_model(status == "completed" and run_dir == self._shown_run)  # it has its model.keras now
        self.run_ended.emit(status, run_dir, message)

    def _set_active_run(self, run_dir: str | None) -> None:
        run_dir = str(Path(run_dir)) if run_dir else None
        if run_dir != self._active_run:
            self._active_run = run_dir
            self.active_run_changed.emit(run_dir or "")

    # ---- the run on screen ---------------------------------------------------------------------
    @property
    def shown_run(self) -> str | None:
        return self._shown_run

    def model_run(self) -> str | None:
        """The run on screen when it has a trained model: what the Export menu exports and the
        Try tab tries."""
        return self._shown_run if self._shown_has_model else None

    def export_run(self) -> str | None:
        """The run the Export menu exports, when it can (:meth:`export_choice`)."""
        return self.export_choice()[0]

    def export_choice(self) -> tuple[str | None, str]:
        """The run the Export menu exports and "", or None and why nothing can be exported. The
        run is the one selected in the run list (a finished run is exported without opening it
        first), else the run on screen; Export writes its trained model, or the last checkpoint
        of a run that stopped before its end (replica-studio export restores it); not while it
        trains, its checkpoints still being written."""
        one = self._selection[0] if len(self._selection) == 1 else None
        if one is not None:
            run, running, listed_model = one.path, one.running, one.info.has_model
        elif self._shown_run is not None:
            run, running, listed_model = self._shown_run, False, self._shown_has_model
        else:
            return None, NOTHING_TO_EXPORT
        host, there = split_run_key(run)
        name = Path(there).name + (f" on {host}" if host else "")
        shown_model = run == self._shown_run and self._shown_has_model
        # A host's run's folder is not here: its model is what its host's listing or history says.
        has_model = (listed_model or shown_model) if host else _has_model(run)
        if has_model:
            return run, ""
        if running or run == self._active_run:
            return None, f"{name} is training: its model can be exported once it has ended"
        if host is None and has_checkpoint(run):
            return run, ""
        return None, f"{name} has no trained model or checkpoint to export"

    def set_shown_run(self, run_dir: str | Path | None, has_model: bool | None = None) -> None:
        """A run came on screen (ShownRun), or none did. Said even when it is the run shown
        before: it was read again. ``has_model``: what its history says of a run on a host, whose
        files are not here (None: its folder here is looked at)."""
        self._shown_run = str(run_dir) if run_dir else None
        self._shown_has_model = _has_model(self._shown_run) if has_model is None else has_model
        if self._status_of_run and self._shown_run != self._status_run:
            self.clear_run_status()  # "Run stopped at step 2,200" is not about the run now on screen
        self.shown_run_changed.emit(self._shown_run or "")

    def _check_model(self, completed: bool) -> None:
        run = self._shown_run
        # A host's run completed on screen has saved its model there; its folder is not here.
        has_model = (completed or self._shown_has_model) if run and split_run_key(run)[0] else _has_model(run)
        if has_model != self._shown_has_model:
            self._shown_has_model = has_model
            self.shown_run_changed.emit(self._shown_run or "")

    # ---- the run list, the forms, the tabs, the status bar -------------------------------------
    @property
    def selection(self) -> tuple[ListedRun, ...]:
        return self._selection

    def set_selection(self, runs: Sequence[ListedRun]) -> None:
        runs = tuple(runs)
        if runs != self._selection:
            self._selection = runs
            self.selection_changed.emit(list(runs))

    def attachable_selection(self) -> ListedRun | None:
        """The one run selected, when it runs and the window follows none (it can attach to it)."""
        one = self._selection[0] if len(self._selection) == 1 else None
        return one if one is not None and one.running and self.is_idle() else None

    def resumable_selection(self) -> ListedRun | None:
        """The one run selected, when it can be resumed (and the window is idle to do it)."""
        one = self._selection[0] if len(self._selection) == 1 else None
        return one if one is not None and one.resumable and not one.running and self.is_idle() else None

    @property
    def listed_runs(self) -> int:
        return self._listed_runs

    def set_listed_runs(self, count: int) -> None:
        if count != self._listed_runs:
            self._listed_runs = count
            self.listed_runs_changed.emit(count)

    @property
    def forms_valid(self) -> bool:
        return self._forms_valid

    def set_forms_valid(self, valid: bool) -> None:
        if valid != self._forms_valid:
            self._forms_valid = valid
            self.forms_valid_changed.emit(valid)

    @property
    def train_blocker(self) -> str:
        return self._train_blocker

    def set_train_blocker(self, text: str) -> None:
        if text != self._train_blocker:
            self._train_blocker = text
            self.train_blocker_changed.emit(text)

    @property
    def tab(self) -> str:
        return self._tab

    def set_tab(self, tab: str) -> None:
        if tab not in TABS:
            raise ValueError(f"no tab {tab!r}; tabs: {', '.join(TABS)}")
        if tab != self._tab:
            self._tab = tab
            self.tab_changed.emit(tab)

    @property
    def run_on(self) -> Host | None:
        return self._run_on

    def set_run_on(self, host: Host | None) -> None:
        """Run on ``host`` (an entry of hosts.json), or on this computer (None)."""
        if host != self._run_on:
            self._run_on = host
            self.run_on_changed.emit(host)

    @property
    def status(self) -> str:
        return self._status

    def set_status(self, text: str) -> None:
        self._status_of_run = False
        self._show_status(text)

    def set_run_status(self, text: str) -> None:
        """A line about the run on screen now (how it ended): it stays while that run does, until
        :meth:`clear_run_status` or another line."""
        self._status_of_run, self._status_run = True, self._shown_run
        self._show_status(text)

    def clear_run_status(self) -> None:
        """The user turned to something else (another run, an export, the Try tab): a line about
        a run gives way to the run state's own."""
        if self._status_of_run:
            self.set_status(STATE_TEXT.get(self.run_state, self.run_state))

    def _show_status(self, text: str) -> None:
        if text != self._status:
            self._status = text
            self.status_changed.emit(text)


def _has_model(run_dir: str | None) -> bool:
    return run_dir is not None and bool(run_dir) and (Path(run_dir) / MODEL_FILE).is_file()
