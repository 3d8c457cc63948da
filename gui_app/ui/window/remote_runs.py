"""The runs of the Run on host in the window: their rows in the run list, Open and Attach.

A host's runs stay on the host (docs/hosts.md). The run list reads them with ``runs --json``
there (:class:`HostRunsJob`: the system ``ssh`` run by the process runner over the shared
connection, its command line built once ``ssh -G`` has answered off the GUI thread; what it
printed is read into rows on the list's reader thread by :func:`host_rows`) and keys each row
``HOST:RUN_DIR`` (:func:`remote_key`, scp's notation): a local run's key is its absolute
path, so the two never collide, and the Host column names the host. Their histories are not
files here: Open replays the run's events with ``attach RUN_DIR --history --control none`` there
(:class:`RemoteOpen`, its ssh command line built off the GUI thread:
gui_app/ui/workers/host_commands.py; a long run's history comes from its pyramid, a few hundred
KB, then the events after it), and Attach follows a running one the same way (RunAttach), so its
charts are complete however long the window was away. Resume resumes a stopped, interrupted or failed
run there (``resume --host HOST RUN_DIR --detach``, RunActions) and follows it from its first
event, the run's history with it.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

from PySide6.QtCore import QObject, Signal

from gui_app.core.answers import RunRow, decode
from gui_app.core.backends.ssh import SshBackend
from gui_app.core.config import ConfigError, RunConfig
from gui_app.core.events import Event
from gui_app.core.history import RunHistory
from gui_app.core.history.coarse import long_history
from gui_app.core.history.wire import decode_history
from gui_app.core.live_runs import RunProcess
from gui_app.core.rundir import RunInfo
from gui_app.core.ssh import SSH_FAILED, SSH_MISSING, HostError, explain_failure
from gui_app.core.ssh_hosts import Host, run_key, split_run_key
from gui_app.identity import app_command
from gui_app.ui.window.shown_run import ShownRun
from gui_app.ui.window.window_state import TRAINING, WindowState
from gui_app.ui.workers.background import Background
from gui_app.ui.workers.engine_job import EngineJob
from gui_app.ui.workers.host_commands import when_prepared
from gui_app.ui.workers.run_job import RunJob

LIST_TIMEOUT_S = 60.0


def list_arguments(host: Host) -> list[str]:
    """The engine command there that lists the host's runs (its runs folder, when hosts.json names one)."""
    return ["runs", "--json", *(["--runs-dir", host.runs_dir] if host.runs_dir else [])]


class HostRunsJob(EngineJob):
    """``runs --json`` on ``host`` over the system ``ssh`` (``command``, built by
    :class:`~gui_app.core.backends.ssh.SshBackend` once it is prepared): its answer is the text it
    printed (a JSON list, maybe after a login banner), read by :func:`host_rows` off the GUI thread.
    Not ``runs --json --host HOST`` through the engine here: the list is read again every two
    seconds while a run there runs, and a Python start costs ~0.55 s of CPU here each time; ssh
    over the shared connection costs next to none. Failures are worded as the engine's ``--host``
    words them (ssh's own exit 255: :func:`~gui_app.core.ssh.explain_failure`), so the window tells
    a host that cannot run commands once, on the Devices section."""

    def __init__(self, command: Sequence[str], host: Host, parent: QObject | None = None) -> None:
        super().__init__(command, name=f"{host.name}: 'runs --json'", timeout_s=LIST_TIMEOUT_S, parent=parent)
        self.host = host
        self._printed: list[str] = []
        self._said: list[str] = []  # ssh's stderr (and the command's there), to explain a failure
        self._process.text_answers = True  # the printed list is the answer, not a stray for the Log tab
        self._process.text_line.connect(self._printed.append)
        self._process.log_line.connect(self._said.append)

    def _on_event(self, value: dict) -> None:
        self._printed.append(json.dumps(value))  # a JSON object line is printed text here too

    def _report_end(self, code: int, crashed: bool, line: str) -> None:
        if code == 0 and not crashed:
            self._reported = True
            self.result.emit("\n".join(self._printed))
        elif code == SSH_FAILED:
            self._fail(explain_failure(self.host, "\n".join(self._said)))
        else:
            said = [text.strip() for text in self._said if text.strip()]
            why = said[-1] if said else "crashed" if crashed else f"exit code {code}"
            self._fail(f"{self.host.name}: 'runs --json' failed there: {why}")

    def _on_start_failed(self, message: str) -> None:
        super()._on_start_failed(SSH_MISSING)


def host_rows(host_name: str, text: str) -> list[tuple[RunInfo, bool, RunProcess | None, str]]:
    """The rows of what ``runs --json`` printed there: the user's own runs only (``own``, by the
    folder's owner there; an older app that does not say is taken at its word), not the runs other
    users left in a shared runs folder, which this user can neither resume nor stop."""
    try:
        listed = json.loads(text.strip().splitlines()[-1]) if text.strip() else []
    except ValueError:
        raise HostError(f"{host_name}: 'runs --json' there printed no list ({text.strip()[:80]!r})") from None
    rows = [decode(RunRow, entry) for entry in (listed if isinstance(listed, list) else [])]
    return [_row(host_name, row) for row in rows if row is not None and row.run_dir and row.own]


def _row(host_name: str, row: RunRow) -> tuple[RunInfo, bool, RunProcess | None, str]:
    try:
        config = RunConfig.from_dict(row.config) if row.config else None
    except ConfigError:
        config = None
    process = (RunProcess(pid=row.pid, host=row.host or host_name, command="train", detached=bool(row.detached),
                          started=0.0) if row.pid else None)
    info = RunInfo(path=Path(run_key(host_name, row.run_dir)), config=config, status=row.status or "new",
                   started=row.started, step=row.step, total_steps=row.total_steps,
                   test_accuracy=row.test_accuracy, message=row.message, has_model=row.has_model)
    return info, row.resumable, process, host_name  # resumable: as it reads there


class RemoteOpen(QObject):
    """Open a run of a host: its events replayed from there, folded into one history, shown."""

    note = Signal(str)

    def __init__(self, state: WindowState, shown: ShownRun, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._state, self._shown = state, shown
        self._job: RunJob | None = None
        self._events: list[Event] = []
        self._long: RunHistory | None = None  # a long run's history from its pyramid (attach --history)
        self._background = Background(self)
        self._asked = 0  # the Opens asked for: only the latest one's replay starts

    def open(self, host: Host, run_dir: str) -> None:
        if not self._state.is_idle():
            self._state.set_status("A run is active: stop it before opening another")
            return
        if self._job is not None:
            self._job.discard()
        self._job = None
        self._events, self._long = [], None
        self._state.set_status(f"Reading {Path(run_dir).name} from {host.name}…")
        backend = SshBackend(run_dir, host)
        self._asked += 1
        asked = self._asked
        # its ssh command line once ssh -G has answered, off the GUI thread (host_commands)
        when_prepared(self._background, backend, lambda: self._replay(asked, backend, run_dir))

    def _replay(self, asked: int, backend: SshBackend, run_dir: str) -> None:
        if asked != self._asked:  # another Open came meanwhile
            return
        key = run_key(backend.host.name, run_dir)
        try:
            command = backend.command(app_command, ["attach", run_dir, "--history", "--control", "none"])
        except HostError as exc:  # no folder for ssh's shared connections
            self._state.set_status(f"Cannot open {key}: {exc}")
            self.note.emit(f"Cannot open {key}: {exc}")
            return
        job = RunJob(command, parent=self)
        job.history.connect(self._on_history)
        job.on_result(self._events.append).on_end(lambda _status, message: self._show(job, key, message))
        self._job = job.start()

    def _on_history(self, value: dict) -> None:
        """A long run's history from its pyramid there, folded as Open folds it here."""
        if self.sender() is not self._job:  # replaced by a later Open
            return
        try:
            head = decode_history(value)
        except ValueError as exc:
            self.note.emit(f"The run's history could not be read ({exc}): its last steps only")
            return
        self._long = long_history(head.view, head.started, head.first_started)

    def is_reading(self) -> bool:
        return self._background.busy() or (self._job is not None and self._job.is_running())

    def _show(self, job: RunJob, key: str, message: str) -> None:
        if job is not self._job:  # replaced by a later Open
            return
        events, self._events = self._events, []
        history, self._long = self._long or RunHistory(), None
        if not events and not history.coarse:
            self._state.set_status(f"Cannot open {key}: {message}")
            self.note.emit(f"Cannot open {key}: {message}")
            return
        history.add(events)
        history.run_dir = key
        self._shown.show_history(key, history)
        self._state.set_tab(TRAINING)
        self._state.set_run_status(f"{Path(split_run_key(key)[1]).name} on {split_run_key(key)[0]}")
