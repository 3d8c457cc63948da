"""RunsPanel: the runs in the runs folder, read off the GUI thread (:mod:`.run_reader`).

The window paints before the folder is read: a refresh reads on the reader's thread and the
rows arrive in batches, newest first, each placed where the current sort puts it; rows already
shown are updated in place (so the selection, the current row and the scroll position stay),
and rows of runs that went away are removed when the fill ends. A refresh during a fill drops
the older fill. While a fill runs the panel says how many runs it is reading.

Open one to see its charts and evaluation again, select two to overlay them (or more to compare
them: gui_app/ui/dialogs/compare.py), resume a run
that was stopped, whose process died, or that failed after writing a checkpoint, export a
finished run's model. A failed run shows its one-line reason. The buttons are also in the list's context menu.

It follows the window's state (gui_app.ui.window.window_state): while a run is active nothing else
is opened or resumed (one run at a time), the active run shows as running, and a run that ended
shows why and is selected. It sets the state's selection: the runs selected, as read.

Runs that live on their own (docs/detached.md) show as running while their process runs them,
whoever started them, and runs submitted to Slurm or Kubernetes show their job's state ("pending
(Resources)", "running", "requeued"; gui_app/core/backends/__init__.py); the list reads the folder again every few
seconds while one runs or waits. The run
the window follows is marked (an icon, a tooltip); another running one can be attached to
(double-click, Attach). The Host column names the machine a run's process ran on when it is
another one (a shared runs folder). What a row shows and where it sorts to: run_rows.py.

With a Run on host (``WindowState.run_on``, followed through its signal) the list is the host's
runs, this computer's left out until Run on is this computer again (mixed in one list, which is
where was unclear), keyed ``HOST:RUN_DIR``, the host in the Host column
(gui_app.ui.window.remote_runs); they open, attach, resume and export over ssh, and what needs their
files here (overlay, the folder) is disabled. A host that does not answer is one line beside the
buttons, and its rows stay as last read; when the host itself cannot run commands (ssh fails, no app
there) that line points to the window's Devices section, which tells it whole (``host_failed``), as
device detection meets the same failure.

An opened run bundle is a row too (:meth:`add_bundle`), resumed in a new run folder, not its copy.
"""
from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt, QTimer, QUrl, Signal
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QMenu,
    QPushButton,
    QSizePolicy,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from gui_app.core.backends.base import JobState
from gui_app.core.live_runs import RunProcess
from gui_app.core.rundir import RunInfo, has_checkpoint
from gui_app.core.ssh import is_host_failure
from gui_app.core.ssh_hosts import Host, split_run_key
from gui_app.ui.window.run_reader import RunReader
from gui_app.ui.window.run_rows import (
    COLUMNS,
    EXPORT_TIP,
    HOST,
    PATH_ROLE,
    STARTED,
    bundle_export_tip,
    fill_row,
    insert_sorted,
    move_sorted,
    resort,
    resume_tip,
    select_exactly,
    sort_key,
)
from gui_app.ui.window.window_state import ListedRun, WindowState

MIN_ROWS = 5
LIVE_REFRESH_MS = 2000  # how often the list is read again while a run is running

class RunsPanel(QWidget):
    open_requested = Signal(str)
    overlay_requested = Signal(str, str)  # main run, run drawn on top
    compare_requested = Signal(list)  # two or more run folders, side by side
    resume_requested = Signal(str)
    attach_requested = Signal(str)
    export_requested = Signal(str)
    filled = Signal()  # a refresh has ended: every run in the folder is listed as it is on disk
    host_failed = Signal(str)  # the Run on host cannot run commands: its line, told on the Devices section

    def __init__(self, state: WindowState, parent: QWidget | None = None, host: Host | None = None) -> None:
        super().__init__(parent)
        self._state = state
        self._drawn_running: str | None = None  # the row last drawn as running (the state's active run)
        self._runs: dict[str, RunInfo] = {}
        self._resumable: dict[str, bool] = {}  # read with the run, off the GUI thread (it stats the folder)
        self._live: dict[str, RunProcess | None] = {}  # the process running it now (read with the run)
        self._hosts: dict[str, str] = {}  # where its process ran, when another machine
        self._jobs: dict[str, tuple[str, JobState]] = {}  # a run submitted to Slurm or Kubernetes: its job and state
        self._bundles: dict[str, str] = {}  # a bundle's row (its temporary copy) -> the bundle's path
        self._items: dict[str, QTreeWidgetItem] = {}
        self._notes: dict[str, str] = {}  # why a run ended, when its events cannot say (a crash)
        self._seen: set[str] = set()  # runs the current fill has read
        self._wanted: set[str] = set()  # selected before their rows arrived (a run that just finished)
        self._read = 0
        self._total: int | None = None  # the number of runs, once counted
        if host is not None:  # a panel on its own (a test): Run on that host
            state.set_run_on(host)
        self._host_problem = ""  # why the host's runs could not be read this time
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self.tree = QTreeWidget()
        self.tree.setHeaderLabels(COLUMNS)
        self.tree.setRootIsDecorated(False)
        self.tree.setAlternatingRowColors(True)
        # Rows are placed by run_rows.sort_key, not by Qt's sorting (run_rows says why).
        self.tree.setSortingEnabled(False)
        header = self.tree.header()
        header.setSectionsClickable(True)
        header.setSortIndicatorShown(True)
        header.setSortIndicator(STARTED, Qt.SortOrder.DescendingOrder)  # newest first
        header.sortIndicatorChanged.connect(lambda *_: resort(self.tree))
        self.tree.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setStretchLastSection(True)
        self.tree.setColumnHidden(HOST, True)  # until a run's process ran on another machine
        self.tree.itemSelectionChanged.connect(self._update_buttons)
        self.tree.itemDoubleClicked.connect(self._on_double_clicked)
        self.tree.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.tree.customContextMenuRequested.connect(self._on_context_menu)
        # Five rows at least, so a 720 px high screen still lists a few runs beside the tabs.
        self.tree.setMinimumHeight(self.tree.header().sizeHint().height() + MIN_ROWS * (self.fontMetrics().height() + 6)
                                   + 2 * self.tree.frameWidth())
        layout.addWidget(self.tree, 1)
        row = QHBoxLayout()
        self.open_button = self._button(row, "Open", "Show the selected run's charts and evaluation",
                                        lambda: self._open(self.selected_paths()[0]))
        self.overlay_button = self._button(row, "Overlay", "Draw the second selected run over the first",
                                           lambda: self.overlay_requested.emit(*self.selected_paths()[:2]))
        self.compare_button = self._button(row, "Compare…", "The selected runs side by side: the settings that "
                                                            "differ, their final figures and curves",
                                           lambda: self.compare_requested.emit(self.selected_paths()))
        self.attach_button = self._button(row, "Attach", "Follow the selected running run: its charts, "
                                                         "Stop, Pause and Continue",
                                          lambda: self.attach_requested.emit(self.selected_paths()[0]))
        self.resume_button = self._button(row, "Resume", resume_tip(None, False, False),
                                          lambda: self.resume_requested.emit(self.selected_paths()[0]))
        self.export_button = self._button(row, "Export…", EXPORT_TIP,
                                          lambda: self.export_requested.emit(self.selected_paths()[0]))
        self.folder_button = self._button(row, "Show folder", "Open the run directory in the file manager",
                                          self._show_folder)
        # Takes the row's spare room and asks for none: the text must not widen the window.
        self.reading_label = QLabel(alignment=Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        self.reading_label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        row.addWidget(self.reading_label, 1)
        self._button(row, "Refresh", "Read the runs folder again", self.refresh)
        layout.addLayout(row)
        self._reader = RunReader(self)
        self._reader.counted.connect(self._on_counted)
        self._reader.jobs.connect(self._on_jobs)
        self._reader.batch.connect(self._on_batch)
        self._reader.done.connect(self._on_done)
        self._reader.host_failed.connect(self._on_host_failed)
        self._live_timer = QTimer(self, singleShot=True, interval=LIVE_REFRESH_MS)
        self._live_timer.timeout.connect(self.refresh)
        state.run_state_changed.connect(self._update_buttons)
        state.active_run_changed.connect(self._on_active_run_changed)
        state.run_ended.connect(self._on_run_ended)
        state.run_on_changed.connect(lambda _host: self.refresh())  # another host's runs, or this computer's
        self.refresh()

    @staticmethod
    def _button(row: QHBoxLayout, text: str, tip: str, slot) -> QPushButton:
        button = QPushButton(text)
        button.setToolTip(tip)
        button.clicked.connect(slot)
        row.addWidget(button)
        return button

    # ---- public ----------------------------------------------------------------------
    def refresh(self) -> None:
        """Read the runs folder again, on the reader's thread; the rows change as runs are read."""
        self._reader.read(self._state.runs_dir, self._state.run_on)
        if self._reader.is_filling():
            self._seen, self._read, self._total = set(), 0, None
            self._host_problem = ""
            self._show_reading()

    def is_filling(self) -> bool:
        """A refresh is still reading the folder (``filled`` is emitted when it ends)."""
        return self._reader.is_filling()

    def stop_reading(self) -> None:
        """Drop any fill and end the reader's thread (the window closes)."""
        self._reader.stop()
        self.reading_label.clear()

    def add_bundle(self, info: RunInfo, bundle: str) -> None:
        """List the run of ``bundle``, opened in the window (``info``: its copy), and select it."""
        path = str(info.path)  # a new temporary folder each time a bundle is opened
        self._bundles[path], self._runs[path], self._resumable[path] = bundle, info, info.resumable
        self._live[path], self._hosts[path] = None, f"bundle {Path(bundle).name}"
        self._items[path] = item = QTreeWidgetItem()
        self._fill(item, info)
        insert_sorted(self.tree, item)
        self.tree.setColumnHidden(HOST, False)
        self._state.set_listed_runs(len(self._items))
        self.select(path)

    def selected_paths(self) -> list[str]:
        return [item.data(0, PATH_ROLE) for item in self.tree.selectedItems()]

    def select(self, *run_dirs: str | Path) -> None:
        """Select these runs; a run not listed yet is selected when its row arrives."""
        wanted = {str(Path(p)) for p in run_dirs}
        self._wanted = wanted - set(self._items) if self.is_filling() else set()
        select_exactly(self.tree, [item for path, item in self._items.items() if path in wanted])

    # ---- following the state ---------------------------------------------------------
    def _on_active_run_changed(self, run_dir: str) -> None:
        """The run the engine is working on shows as running (on disk it looks interrupted)."""
        before, self._drawn_running = self._drawn_running, run_dir or None
        for path in (before, self._drawn_running):
            self._show_again(path)
        self._update_buttons()
        self.refresh()

    def _on_run_ended(self, status: str, run_dir: str, message: str) -> None:
        """List the run that ended at once (a run that failed before its first step has a row
        only from now on: the engine said where only in its run_finished) and select it; show why
        it ended when its events.jsonl cannot: a process that crashed or was killed wrote no
        run_finished (on disk it is "interrupted", and stays resumable)."""
        if not run_dir:
            return
        if status in ("failed", "interrupted") and message:
            self._notes[str(Path(run_dir))] = message
            self._show_again(str(Path(run_dir)))
        self.refresh()
        self.select(run_dir)

    # ---- filling ---------------------------------------------------------------------
    def _show_reading(self) -> None:
        host = self._state.run_on
        if host is not None:
            text = f"Reading the runs on {host.name}…"
        elif self._total is None:
            text = "Reading the runs folder…"
        else:
            text = f"Reading {self._total:,} runs… {self._read:,} read"
        self.reading_label.setText(text)

    def _on_counted(self, count: int) -> None:
        self._total = count
        self._show_reading()

    def is_running(self, run_dir: str | Path) -> bool:
        """A process runs this run now, or its scheduler's job is active (as last read)."""
        path = str(Path(run_dir))
        return self._live.get(path) is not None or self._job_active(path)

    def _job_active(self, path: str) -> bool:
        job = self._jobs.get(path)
        return job is not None and job[1].active

    def job(self, run_dir: str | Path) -> tuple[str, JobState] | None:
        """The run's job and its state (as last read); None for a run no scheduler runs."""
        return self._jobs.get(str(Path(run_dir)))

    def running_runs(self) -> list[str]:
        """The runs a process or a scheduler's job runs now, newest first (as last read)."""
        running = [path for path in self._runs if self.is_running(path)]
        return sorted(running, key=lambda path: self._runs[path].started or 0.0, reverse=True)

    def _on_jobs(self, jobs: dict[str, tuple[str, JobState]]) -> None:
        """The jobs' states, read before the fill's rows: redraw the rows whose state changed."""
        before, self._jobs = self._jobs, jobs
        for path in set(before) | set(jobs):
            if before.get(path) != jobs.get(path):
                self._show_again(path)

    def _on_batch(self, rows: list[tuple[RunInfo, bool, RunProcess | None, str]]) -> None:
        for info, resumable, process, host in rows:
            path = str(info.path)
            self._seen.add(path)
            unchanged = (self._runs.get(path) == info and self._resumable.get(path) == resumable
                         and self._live.get(path) == process and self._hosts.get(path) == host)
            self._runs[path], self._resumable[path] = info, resumable
            self._live[path], self._hosts[path] = process, host
            item = self._items.get(path)
            if item is None:
                item = self._items[path] = QTreeWidgetItem()
                self._fill(item, info)
                insert_sorted(self.tree, item)
                if path in self._wanted:
                    item.setSelected(True)
            elif not unchanged:
                self._refill(item, info)
        self._read += len(rows)
        self._show_reading()
        self._state.set_listed_runs(len(self._items))
        self._update_buttons()

    def _on_host_failed(self, line: str) -> None:
        self._host_problem = line
        host = self._state.run_on
        if host is not None and is_host_failure(host.name, line):
            # Detection and the dataset check meet the same failure: the Devices section tells it whole.
            self._host_problem = f"{host.name}: its runs are not listed (see Devices)"
            self.host_failed.emit(line)

    def _on_done(self) -> None:
        host = self._state.run_on
        kept = host.name if host is not None and self._host_problem else None
        gone = [path for path in self._items if path not in self._seen and path not in self._bundles
                and (kept is None or split_run_key(path)[0] != kept)]
        for path in gone:  # deleted or moved away since the last fill
            item = self._items.pop(path)
            self.tree.takeTopLevelItem(self.tree.indexOfTopLevelItem(item))
            for known in (self._runs, self._resumable, self._live, self._hosts):
                known.pop(path, None)
        self._wanted = set()
        self.tree.setColumnHidden(HOST, not any(self._hosts.values()))
        if any(process is not None for process in self._live.values()) or any(map(self._job_active, self._jobs)):
            self._live_timer.start()
        self.reading_label.setText(self._host_problem)
        self.reading_label.setToolTip(self._host_problem)
        self._state.set_listed_runs(len(self._items))
        self._update_buttons()
        self.filled.emit()

    def _show_again(self, path: str | None) -> None:
        """Redraw one row from what was read (the active run or a note changed)."""
        item, info = self._items.get(path or ""), self._runs.get(path or "")
        if item is not None and info is not None:
            self._refill(item, info)

    def _refill(self, item: QTreeWidgetItem, info: RunInfo) -> None:
        """Show ``info`` in a listed row, moving it only if its place in the sort changed."""
        column = self.tree.header().sortIndicatorSection()
        before = sort_key(item, column)
        self._fill(item, info)
        if sort_key(item, column) != before:
            move_sorted(self.tree, item)

    # ---- rows ------------------------------------------------------------------------
    def _fill(self, item: QTreeWidgetItem, info: RunInfo) -> None:
        path = str(info.path)
        fill_row(item, info, attached=path == self._state.active_run, process=self._live.get(path),
                 resumable=self._resumable.get(path, False), host=self._hosts.get(path, ""),
                 note=self._notes.get(path, ""), style=self.style(), job=self._jobs.get(path))

    def _update_buttons(self) -> None:
        """Enable what applies to the selection, and give the state the runs selected."""
        paths = self.selected_paths()
        self._state.set_selection([ListedRun(self._runs[p], self._resumable.get(p, False), self._live.get(p),
                                             self._job_active(p), self._bundles.get(p, ""))
                                   for p in paths if p in self._runs])
        one, idle = len(paths) == 1, self._state.is_idle()
        here = not any(split_run_key(p)[0] for p in paths)  # a host's run has no files here
        self.open_button.setEnabled(one and idle)
        self.overlay_button.setEnabled(len(paths) == 2 and idle and here)
        self.compare_button.setEnabled(len(paths) >= 2 and here)  # it reads their files: a live run can go on
        self.folder_button.setEnabled(one and here)
        self.attach_button.setEnabled(self._state.attachable_selection() is not None)
        info = self._runs.get(paths[0]) if one else None
        resumable = bool(info and self._resumable.get(paths[0])) and not self.is_running(paths[0])
        # A run stopped early exports its last checkpoint (replica-studio export restores it).
        active = info is not None and str(info.path) == self._state.active_run
        # A host's run exports its model there, copied back (its checkpoints are not looked at from here).
        self.export_button.setEnabled(bool(info and (info.has_model or here and not active
                                                     and has_checkpoint(info.path))))
        self.resume_button.setEnabled(resumable and idle and not active)  # resumable: info is there
        bundle = one and paths[0] in self._bundles  # what a bundle holds decides: its tips say what it lacks
        self.resume_button.setToolTip(resume_tip(info, resumable, bundle))
        self.export_button.setToolTip(bundle_export_tip(self.export_button.isEnabled()) if bundle else EXPORT_TIP)

    def _open(self, path: str) -> None:
        """Open a run; one whose job has not started it yet has nothing to show: it is followed."""
        info = self._runs.get(path)
        waiting = info is not None and info.status == "new" and self._job_active(path)
        (self.attach_requested if waiting else self.open_requested).emit(path)

    def _on_double_clicked(self, item: QTreeWidgetItem, _column: int) -> None:
        if self._state.is_idle():  # the charts belong to the live run
            path = item.data(0, PATH_ROLE)
            (self.attach_requested if self.is_running(path) else self.open_requested).emit(path)

    def _on_context_menu(self, position) -> None:
        if not self.selected_paths():
            return
        menu = QMenu(self)
        for button in (self.open_button, self.attach_button, self.overlay_button, self.compare_button,
                       self.resume_button, self.export_button, self.folder_button):
            menu.addAction(button.text(), button.click).setEnabled(button.isEnabled())
        menu.exec(self.tree.viewport().mapToGlobal(position))

    def _show_folder(self) -> None:
        QDesktopServices.openUrl(QUrl.fromLocalFile(self.selected_paths()[0]))
