"""RunAttach: the window follows a run that is running already -- one it started before it was
closed (or killed), or one started in a terminal (docs/detached.md).

Asked from the run list (double-click on a running run, Attach, Run -> Attach) and, at launch,
for the newest running run once the list has been read, when the window follows none. The
charts fill from the run's history, read from ``events.jsonl`` in this process as Open reads a
run (gui_app.core.rundir.read_history_so_far), and ``attach --from N`` goes on after the N lines
read: replaying a long run through ``attach`` instead would send every line through a pipe, a
JSON decode on the supervisor's thread and the window's batches (tens of thousands of lines for
a day-long run), where the file read is one fold of the same lines with nothing in between. An
events file of more than file_actions.READ_HERE_BYTES is read and folded on a Background thread,
as Open reads one (6 MB: over a second), and followed once read (the latest attach asked for).
From then on the supervisor follows it as it follows a run it started: Stop, Pause and Continue
act on it, and the window's run state is the run's.

A run submitted to Slurm (or applied to Kubernetes) whose job has not started it yet (no
``run_started``) is followed from its first event, as the window follows a run right after
Submit: the status line says what the scheduler said in the run list's last read ("pending
(Resources)"), ``attach`` waits while the job is pending, and the charts fill once the workers
start.

A long run (an events file of rundir.LONG_RUN_BYTES or more) is not read here: ``attach
--history`` sends its history from its pyramid, then its events from where the pyramid ends
(gui_app/engine/commands/attach_history.py), and the supervisor's ``history`` signal shows it as Open
would; its pyramid, when an old run has none, is built by that attach process, not the window.

A run on an SSH host (listed as ``HOST:RUN_DIR``: gui_app.ui.window.remote_runs) has no file
here: its history comes with ``attach --history`` there (every line from 0 for a short run),
through the supervisor, so a window that was closed for hours shows the run's charts complete,
and a long run's re-attachment carries a few hundred KB, not its whole events file.
"""
from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject, Signal

from gui_app.core.history import RunHistory
from gui_app.core.rundir import LONG_RUN_BYTES, HistorySoFar, events_bytes, read_history_so_far
from gui_app.core.ssh_hosts import HostsFileError, find_host, split_run_key
from gui_app.ui.window.file_actions import READ_HERE_BYTES
from gui_app.ui.window.runs_panel import RunsPanel
from gui_app.ui.window.shown_run import ShownRun
from gui_app.ui.window.window_state import TRAINING, WindowState
from gui_app.ui.workers.background import Background, Send
from gui_app.ui.workers.supervisor import RunSupervisor


class RunAttach(QObject):
    note = Signal(str)

    def __init__(self, state: WindowState, *, supervisor: RunSupervisor, shown: ShownRun, runs: RunsPanel,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._state, self._supervisor, self._shown, self._runs = state, supervisor, shown, runs
        self._at_launch = True  # the first fill of the run list has not been looked at yet
        self._background = Background(self)
        self._asked = 0  # the attaches asked for: only the latest one's read is followed
        runs.attach_requested.connect(self.attach)
        runs.filled.connect(self._on_filled)
        supervisor.history.connect(self._on_history)

    def attach(self, run_dir: str) -> bool:
        """Show the run's history and follow it live; False when the window follows a run
        already or the run has not started (no run_started yet) and no scheduler's job will start it."""
        if not self._state.is_idle():
            return False
        self._asked += 1  # a read under way for an earlier attach is not followed
        host_name, there = split_run_key(run_dir)
        if host_name is not None:
            return self._attach_there(host_name, there)
        if _is_long(run_dir):
            self._shown.clear()
            self.note.emit(f"Following {Path(run_dir).name} (its history, then its events)")
            self._supervisor.attach(run_dir, None, 0, history=True)
            self._state.set_tab(TRAINING)
            return True
        if events_bytes(run_dir) > READ_HERE_BYTES:  # read on a thread: the window does not freeze
            self._state.set_status(f"Reading {Path(run_dir).name}…")
            self._background.run(_read_so_far, self._asked, run_dir, deliver=self._on_read,
                                 failed=self._on_read_failed, name="attach-read")
            return True
        return self._follow_read(run_dir, read_history_so_far(run_dir))

    def is_reading(self) -> bool:
        """A run's history is being read before it is followed."""
        return self._background.busy()

    def _on_read(self, read: tuple[int, str, HistorySoFar]) -> None:
        asked, run_dir, so_far = read
        if asked != self._asked or not self._state.is_idle():  # another attach, or a run started meanwhile
            return
        self._state.set_status("")
        if not self._follow_read(run_dir, so_far):
            self._state.set_status(f"{Path(run_dir).name} has not started: nothing to follow")

    def _on_read_failed(self, exc: BaseException) -> None:
        self._state.set_status(f"Cannot read the run: {exc}")  # its folder went away meanwhile

    def _follow_read(self, run_dir: str, so_far: HistorySoFar) -> bool:
        """Show the history read and follow the run from the line after it."""
        started = so_far.history.started
        if started is None:
            return self._follow_job(run_dir)
        self._shown.show_history(run_dir, so_far.history)
        self.note.emit(f"Following {Path(run_dir).name} (from line {so_far.lines} of its events)")
        self._supervisor.attach(run_dir, started, so_far.lines, paused=so_far.paused, inode=so_far.inode)
        self._state.set_tab(TRAINING)
        return True

    def _follow_job(self, run_dir: str) -> bool:
        job = self._runs.job(run_dir)
        if job is None or not job[1].active:
            return False
        said = f"{job[1].scheduler} job {job[0]} is {job[1].describe()}"
        self._shown.clear()
        self.note.emit(f"Following {Path(run_dir).name} once it starts: {said}")
        self._supervisor.follow(run_dir)
        self._state.set_status(f"{said}: following the run once it starts (the run list shows why it waits)…")
        self._state.set_tab(TRAINING)
        return True

    def _attach_there(self, host_name: str, run_dir: str) -> bool:
        try:
            host = find_host(host_name)
        except HostsFileError as exc:
            self._state.set_status(str(exc))
            return False
        self._shown.clear()
        self.note.emit(f"Following {Path(run_dir).name} on {host.name} (its history, then its events)")
        self._supervisor.attach(run_dir, None, 0, host=host, history=True)
        self._state.set_tab(TRAINING)
        return True

    def _on_history(self, run_dir: str, history: RunHistory) -> None:
        """The attached run's history from its pyramid, before its events."""
        self._shown.show_history(run_dir, history)

    def attach_selected(self) -> None:
        selected = self._state.attachable_selection()
        if selected is not None:
            self.attach(selected.path)

    def _on_filled(self) -> None:
        """At launch: follow the newest running run, when the window follows none."""
        if not self._at_launch:
            return
        self._at_launch = False
        running = self._runs.running_runs()
        if running and self._state.is_idle():
            self.attach(running[0])


def _read_so_far(send: Send, asked: int, run_dir: str) -> None:
    send((asked, run_dir, read_history_so_far(run_dir)))


def _is_long(run_dir: str) -> bool:
    """A run whose history comes from its pyramid (rundir.read_long_run's size rule)."""
    return events_bytes(run_dir) >= LONG_RUN_BYTES
