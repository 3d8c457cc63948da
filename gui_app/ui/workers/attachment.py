"""Attachment: the window's hold on a run that lives on its own (docs/detached.md).

Every run the window trains is detached: a short job starts it (``train CONFIG --detach``,
``resume RUN_DIR --detach``: :class:`DetachedStart`, whose answer is the run directory, or the
run's own error line), then ``attach RUN_DIR --from N`` follows it as a
:class:`~gui_app.ui.workers.run_job.RunJob`: the run's events as JSON lines on its stdout, control
words (stop, pause, continue, checkpoint) on its stdin, which it forwards to the run's channel.
So the window's process is never the run's parent, and nothing the window does to its own
processes -- closing, crashing, a ``kill -9`` -- reaches the run.

The attachment counts the lines of ``events.jsonl`` it has (``N``), so when ``attach`` ends
while the run still runs (killed, or its connection dropped) it attaches again from line ``N``,
after 0.5 s doubling to 10 s: no step lost, none shown twice. After a history line the lines are
counted from its byte, in the file of its inode (``--from-byte B --from N --inode I``); when a
resume replaced the file meanwhile, attach exits 3 and the history is asked for again. It tells
the two ends apart by the run's lock (gui_app/core/live_runs.py): a run whose process is gone
is over, and its own error line (the last line of ``RUN_DIR/engine.log`` that states an error)
says why, as a run's stderr did when the window was its parent. The run's ``engine.log`` is followed for the Log tab.
A run submitted to Slurm (gui_app/core/backends/slurm.py) goes on while its job is active, and its
job's output (``slurm-JOBID.out``) is its log. A run applied to Kubernetes is followed through its
local record (gui_app/core/backends/kubernetes.py): ``attach`` copies the chief's output into it.

A run on an SSH host (``host``: docs/hosts.md) is followed by ``attach`` there, run over the
system ``ssh`` (gui_app.core.ssh.remote_argv), not through ``attach --host``: that command folds
ssh's failures into its exit 2, which a bad run directory also exits with, while here ssh's own
exit 255 says the connection failed (docs/architecture.md, "OpenSSH facts"), and attach's 1 that
the run's process is gone. On 255 (or the ssh client killed) the run goes on there, and the
attachment says "connection to HOST lost, reconnecting…" and attaches again with the same
back-off, for as long as it takes (a laptop asleep for hours). There is no lock or log to read
here: the run's end comes from attach there, and its log is followed with ``log --follow`` there
(:class:`~gui_app.ui.workers.remote_log.RemoteLog`), whose last lines come before ``ended``. Their
ssh command lines are built once ``ssh -G`` has answered on a thread of their own, never on the
GUI thread (gui_app/ui/workers/host_commands.py).

    event(Event)      every event after line N, decoded once (RunJob)
    history(RunHistory)  with ``history=True``, a long run's history from its pyramid
                      (``attach --history``), before the events after it: folded as Open folds it,
                      on a Background thread (the events after it wait); again when a
                      re-attachment finds the run's events file replaced (a resume elsewhere),
                      replacing what was shown (an empty one before a short run's every line)
    log_line(str)     the run's log, the attach process's stderr
    notice(str)       "following the run again…" (over ssh: "connection to HOST lost,
                      reconnecting…") while it re-attaches; "" once attached again
    ended(str, str)   once: the status and message of run_finished; ``failed`` with the run's
                      error line when its process is gone without one, or a start that failed;
                      ``interrupted`` when it had to be killed; ``detached`` when the window let go
"""
from __future__ import annotations

import os
import signal
import socket
import time
from pathlib import Path
from typing import Any, Callable, Sequence

from PySide6.QtCore import QObject, QTimer, Signal

from gui_app.core.backends import HereBackend, RunBackend, backend_for
from gui_app.core.engine_output import EXIT_OK, error_line
from gui_app.core.events import Event, RunFinished, RunStarted
from gui_app.core.events_follow import last_start_line
from gui_app.core.history import RunHistory
from gui_app.core.history.coarse import long_history
from gui_app.core.history.wire import decode_history
from gui_app.core.line_follow import count_lines
from gui_app.core.live_runs import live_process
from gui_app.core.run_summary import summarize_events
from gui_app.core.rundir import EVENTS_FILE
from gui_app.core.ssh import CONNECT_TIMEOUT_S, RECONNECT_TIMEOUT_S, SSH_FAILED, HostError
from gui_app.core.ssh_hosts import Host
from gui_app.ui.workers.background import Background, Send
from gui_app.ui.workers.detached_start import DetachedStart
from gui_app.ui.workers.host_commands import when_prepared
from gui_app.ui.workers.log_tail import LogTail
from gui_app.ui.workers.remote_log import RemoteLog
from gui_app.ui.workers.run_job import RunJob

DETACHED = "detached"
DETACHED_REASON = "the run goes on in the background"
KILLED_MESSAGE = "the engine process crashed or was killed (out of memory?)"
REATTACHING = "following the run again…"
CONNECTION_LOST = "connection to {host} lost, reconnecting…"
BACKOFF_FIRST_S, BACKOFF_MAX_S = 0.5, 10.0
# attach exits 1 once the run's process is gone and every line is out, 2 on a bad run directory
# (docs/detached.md); any other end of attach (a kill, a dropped connection: 255) is not the run's.
ATTACH_RUN_GONE, ATTACH_BAD_INPUT = 1, 2
# attach --inode exits 3 when the events file is not the one its byte and lines were counted in (a
# resume replaced it): the history is asked for again, and replaces what the window shows
ATTACH_REPLACED = 3
NOT_STARTED = RunJob.NOT_STARTED
# what the window is told, held in order while a history is folded on a thread (Attachment._out)
_EVENT, _HISTORY, _LOG, _END, _FOLDING = "event", "history", "log", "end", "folding"


class Attachment(QObject):
    arrived = Signal(object)  # an event of the run; not "event": that would hide QObject.event()
    history = Signal(object)  # a RunHistory: a long run's history, before its events (history=True)
    log_line = Signal(str)
    notice = Signal(str)
    ended = Signal(str, str)

    def __init__(self, engine_command: Callable[..., list[str]], *, start_command: Sequence[str] = (),
                 run_dir: str = "", from_line: int = 0, host: Host | None = None, history: bool = False,
                 inode: int = 0, parent: QObject | None = None) -> None:
        """``start_command``: the detached start, or none to attach to ``run_dir`` at once.
        ``from_line``: the lines of its events.jsonl the window has; -1: none before the start's own
        run_started (a resume, whose history the window has shown already). ``host``: the SSH
        host the run is on (``run_dir`` is a path there), None for this computer. ``history``: the
        first attach from line 0 asks for a long run's history from its pyramid (``history``),
        not for every line (``attach --history``: docs/detached.md). ``inode``: of the events file
        ``from_line`` was counted in (0: not known), passed as ``attach --inode``."""
        super().__init__(parent)
        self._engine_command, self._start_command = engine_command, list(start_command)
        self.host = host
        self.run_dir, self.lines = run_dir, from_line
        self._history_wanted = history
        self._byte = 0  # the byte of events.jsonl ``lines`` are counted from (--history's offset)
        self._inode = inode  # of the events file ``lines`` (and ``_byte``) count in: --history's line says it
        self._reset = False  # the next attach's lines replace what was shown (its file was replaced)
        self._held: list[list[Any]] = []  # [kind, value]s waiting for a history folded on a thread
        # where the run lives, decided once its directory is known (a start answers it)
        self.backend: RunBackend | None = backend_for(run_dir, host) if run_dir else None
        self._starter: DetachedStart | None = None
        self._job: RunJob | None = None
        self._from = 0  # the line the current attach started at
        self._delay = BACKOFF_FIRST_S
        self._attempt = 0.0  # when the current attach started (time.monotonic)
        self._retry = QTimer(self, singleShot=True)
        self._retry.timeout.connect(self._attach)
        self._kill_timer = QTimer(self, singleShot=True)
        self._kill_timer.timeout.connect(self._kill_run)
        self._stopping = self._detaching = self._killed = self._done = False
        self.kill_reason: str | None = None
        self._notice = ""  # what the window was told about the attachment ("": nothing wrong)
        self._background = Background(self)
        self._log = LogTail(self)
        self._log.line.connect(self.log_line)
        self._remote_log = RemoteLog(lambda start: self._command(["log", self.run_dir, "--follow", "--json",
                                                                   "--from", start]),
                                     from_end=bool(run_dir), parent=self)  # attached or resumed: as a run here
        self._remote_log.line.connect(self.log_line)

    @property
    def remote(self) -> bool:
        """The run lives where only engine commands over a connection reach it (an SSH host)."""
        return self.backend.remote if self.backend is not None else self.host is not None

    # ---- connecting, as the jobs do ----------------------------------------------------------
    def on_result(self, slot: Callable[[Event], Any]) -> Attachment:
        self.arrived.connect(slot)
        return self

    def on_log_line(self, slot: Callable[[str], Any]) -> Attachment:
        self.log_line.connect(slot)
        return self

    def on_end(self, slot: Callable[[str, str], Any]) -> Attachment:
        self.ended.connect(slot)
        return self

    # ---- control -------------------------------------------------------------------------------
    def start(self) -> Attachment:
        if isinstance(self.backend, HereBackend):
            self._log.follow(self.backend, from_end=True)  # what it logged before is not this window's
        if self._start_command:
            self._starter = (DetachedStart(self._start_command, parent=self)
                             .on_result(self._on_started).on_failure(self._on_start_failed)
                             .on_log_line(self.log_line).start())
        else:
            self._attach()
        return self

    def send(self, word: str) -> None:
        if self._job is not None:
            self._job.send(word)

    def stop(self, grace_s: float) -> None:
        """Ask the run to stop (a checkpoint); kill its process if it has not ended after ``grace_s``."""
        if self._stopping or self._done:
            return
        self._stopping = True
        self.send("stop")  # none attached yet: sent as soon as one is
        self.kill_reason = f"the engine did not stop within {grace_s:g} s and was killed"
        self._kill_timer.start(int(grace_s * 1000))

    def detach(self) -> None:
        """Let go of the run (the window closes): the attach process ends, the run goes on.
        ``ended`` says ``detached`` before this returns."""
        self._detaching = True
        self._retry.stop()
        if self._starter is not None:  # the run goes on starting; only the waiting ends
            self._starter.cancel(wait=True)
        if self._job is not None:
            self._job.detach()
        self._finish(DETACHED, DETACHED_REASON)

    # ---- the start -------------------------------------------------------------------------------
    def _on_started(self, answer: Any) -> None:
        self._starter = None
        # a resume continues the run it was given (a scheduler's resume answers its job first)
        self.run_dir = self.run_dir or str(answer).strip()
        self.backend = backend = backend_for(self.run_dir, self.host)
        if not isinstance(backend, HereBackend):
            if self.lines < 0:  # its file is not here: its history comes from there, as a first attach's does
                self.lines, self._history_wanted = 0, True
            self._attach_started()
        elif self.lines < 0:
            # After every line (a Slurm or Kubernetes job was only queued: its start takes seconds), or
            # from the resume's run_started: both read the whole file, hundreds of MB for a long run,
            # so on a thread, not the GUI thread.
            self._background.run(_start_line, self.run_dir, backend.scheduled, deliver=self._on_start_line,
                                 name="start-line")
        else:
            self._log.follow(backend, from_end=self.lines > 0)
            self._attach_started()

    def _on_start_line(self, line: int) -> None:
        if self._done:  # it let go while the file was read
            return
        self.lines = line
        if isinstance(self.backend, HereBackend):
            self._log.follow(self.backend, from_end=self.lines > 0)
        self._attach_started()

    def _attach_started(self) -> None:
        if not self._detaching:
            self._attach()

    def _on_start_failed(self, message: str) -> None:
        self._starter = None
        self._finish("failed", message)

    # ---- attaching, and again ------------------------------------------------------------------
    def _attach(self) -> None:
        if self._done:
            return
        self._attempt = time.monotonic()
        if self.remote:  # its ssh command lines are built once ssh -G has answered, off the GUI thread
            self.backend = self.backend or backend_for(self.run_dir, self.host)
            when_prepared(self._background, self.backend, self._attach_now)
        else:
            self._attach_now()

    def _attach_now(self) -> None:
        if self._done:  # it let go while ssh -G was asked
            return
        self._from = self.lines
        try:
            command = self._attach_command()
        except HostError as exc:  # no folder for ssh's shared connections
            self._finish("failed", str(exc))
            return
        if self.remote:
            self._remote_log.follow()  # again after a dropped connection, from where it was
        job = RunJob(command, parent=self)
        job.history.connect(self._on_history)
        self._job = (job.on_result(self._on_event).on_log_line(self.log_line).on_end(self._on_attach_end)
                     .start())
        if self._stopping:
            self._job.send("stop")  # again: the word may have gone with the last attachment
        if self._notice:  # a re-attachment: say so once it has held for a moment (or an event came)
            job = self._job
            # An ssh that is still connecting (the network is down) runs too: it has held once it
            # outlived ssh's connect timeout. Measured: an outage of 75 s was otherwise reported
            # over at the first retry, one second into its connect.
            held_ms = 1000 if not self.remote else (RECONNECT_TIMEOUT_S + 5) * 1000
            QTimer.singleShot(held_ms, self, lambda: self._reattached(job))

    def _attach_command(self) -> list[str]:
        # over ssh the first attach goes over the connection the start made; connecting again is short attempts.
        # --inode only when the history line said one (an attach that writes it reads it; an older
        # host's does neither) or the window read the file here
        where = (["--history"] if self._history_wanted and self.lines == 0 and not self._byte
                 else ["--from", str(self.lines)] + (["--from-byte", str(self._byte)] if self._byte else [])
                 + (["--inode", str(self._inode)] if self._inode else []))
        return self._command(["attach", self.run_dir, *where],
                             RECONNECT_TIMEOUT_S if self._notice else CONNECT_TIMEOUT_S)

    def _command(self, args: list[str], connect_timeout: int = CONNECT_TIMEOUT_S) -> list[str]:
        """An engine command about the run, run where it lives."""
        backend = self.backend or backend_for(self.run_dir, self.host)
        return backend.command(self._engine_command, args, connect_timeout)

    def _reattached(self, job: RunJob) -> None:
        if job is self._job and job.is_running():
            self._delay = BACKOFF_FIRST_S
            self._say("")

    def _say(self, notice: str) -> None:
        if notice != self._notice:
            self._notice = notice
            self.notice.emit(notice)

    def _on_event(self, event: Event) -> None:
        if self._reset:  # its replaced file came without a history line (a short run): all its lines, from none
            self._reset = False
            self._out(_HISTORY, RunHistory())
        self.lines = self._from + self._job.lines_read if self._job is not None else self.lines + 1
        if self._notice:  # attached again: its first event says so
            self._delay = BACKOFF_FIRST_S
            self._say("")
        if isinstance(event, (RunStarted, RunFinished)) and event.run_dir:
            self.run_dir = self.run_dir or event.run_dir
        self._out(_EVENT, event)

    def _on_history(self, value: dict) -> None:
        """``attach --history``'s first line: the run's history as Open shows it (coarse.long_history,
        folded on a Background thread: up to ~1 s for 2,000 buckets of 8 replicas, which froze the
        window on this one), and the byte of events.jsonl its events go on from and the file's
        inode (a re-attachment says ``--from-byte`` it, ``--from`` the lines read after it and
        ``--inode`` the file). The events that come meanwhile, and the end, wait for it."""
        self._reset = False  # it replaces what was shown
        offset, inode = value.get("offset"), value.get("inode")
        if isinstance(offset, int) and offset >= 0:
            self._byte, self._from, self.lines = offset, 0, 0
            self._inode = inode if isinstance(inode, int) and inode > 0 else 0
        item: list[Any] = [_FOLDING, None]
        self._held.append(item)

        def folded(result: tuple[str, Any]) -> None:
            item[:] = result
            self._release()

        self._background.run(_fold_history, value, deliver=folded, name="history-fold",
                             failed=lambda exc: folded((_LOG, f"the run's history could not be read ({exc}): "
                                                                "the charts show its last steps only")))

    # ---- what the window is told, in order --------------------------------------------------------
    def _out(self, kind: str, value: Any) -> None:
        """Tell the window now, or after the history folded before it (held in order)."""
        if self._held:
            self._held.append([kind, value])
        else:
            self._tell(kind, value)

    def _release(self) -> None:
        """What waited for a history folded on a thread, up to the next one still folding."""
        while self._held and self._held[0][0] != _FOLDING and not self._done:
            kind, value = self._held.pop(0)
            self._tell(kind, value)

    def _tell(self, kind: str, value: Any) -> None:
        if kind == _EVENT:
            self.arrived.emit(value)
        elif kind == _HISTORY:
            self.history.emit(value)
        elif kind == _LOG:
            self.log_line.emit(value)
        else:  # _END: the last thing held
            self._held.clear()
            self._finish(*value)

    def _on_attach_end(self, status: str, message: str) -> None:
        job, self._job = self._job, None
        if job is None:
            return
        job.finished.connect(job.deleteLater)  # after its last signal
        if self._done:
            return
        if job.run_finished is not None:
            self._finish(status, message)
        elif self._detaching:
            self._finish(DETACHED, DETACHED_REASON)
        elif job.exit_code == ATTACH_REPLACED:
            self._history_again()
        elif self.remote and job.exit_code not in (SSH_FAILED, None):
            # attach there ended on its own: the run's process is gone (1), a bad run directory
            # (2), or no app there (127); its line says which
            self._finish("interrupted" if self._killed else "failed", message or KILLED_MESSAGE)
        elif job.exit_code in (ATTACH_BAD_INPUT, NOT_STARTED):
            self._finish("failed", message)
        elif self._run_gone(job.exit_code):
            # Whether it has really ended is its lock's word and its scheduler's (squeue, kubectl:
            # processes that may take seconds): asked on a thread, answered in _on_run_checked.
            self._background.run(run_check, self.run_dir, self.backend, self._stopping,
                                 deliver=self._on_run_checked, name="run-check")
        else:  # killed, or its connection dropped: the run may go on
            self._reattach_later()

    def _history_again(self) -> None:
        """The run's events file was replaced since its lines were counted (it was resumed, its
        steps after the checkpoint dropped): no byte or line count of the old file says where its
        lines go on. Its history is asked for again (``attach --history``), and what it sends replaces
        what the window shows: each event once, none lost."""
        self.log_line.emit("the run's events file was replaced (the run was resumed?): its history is read again")
        self._byte = self._inode = self.lines = 0
        self._history_wanted = self._reset = True
        self._attach()

    def _on_run_checked(self, gone: tuple[tuple[str, str] | None, tuple[str, str] | None] | None) -> None:
        """:func:`run_check`'s answer: None while the run may go on, else its backend's ending
        and how its events say it finished."""
        if self._done:  # it let go (the window closes) while the run was checked
            return
        if gone is None:
            self._reattach_later()
        elif gone[0] is None and gone[1] is not None:  # its events end with run_finished
            self._finish(*gone[1])
        else:
            self._finish(*self._gone(gone[0]))

    def _reattach_later(self) -> None:
        self._say(CONNECTION_LOST.format(host=self.host.name) if self.host is not None else REATTACHING)
        self._retry_later()

    def _retry_later(self) -> None:
        """Attach again after the back-off. Over ssh it counts from the attempt's start, and grows
        only when the attempt failed at once (refused, no route): one that hung in ssh's connect
        while the network was down has waited already, so connects follow one another and one
        is under way when the link comes back. Measured, 75 s outage: 8.7-11 s from "link up" to
        attached when the back-off was waited out after each hung attempt."""
        elapsed = time.monotonic() - self._attempt if self.remote else 0.0
        if elapsed >= self._delay:
            self._retry.start(0)
            return
        self._retry.start(int((self._delay - elapsed) * 1000))
        self._delay = min(self._delay * 2, BACKOFF_MAX_S)

    def _run_gone(self, code: int | None) -> bool:
        """attach said the run's process is gone (1), or that the run has finished without sending
        its run_finished (0): it came before line N (the window read it from the file before it
        attached; a resubmitted Slurm job that ended before its run started). Either way its files
        say how it ended; attaching again would only hear the same."""
        return code == ATTACH_RUN_GONE or (code == EXIT_OK and isinstance(self.backend, HereBackend))

    def _gone(self, ending: tuple[str, str] | None) -> tuple[str, str]:
        """Why a run whose process is gone without run_finished ended (``ending``: its scheduler's
        word, :meth:`~gui_app.core.backends.base.HereBackend.ending`)."""
        if self._killed:
            return "interrupted", self.kill_reason or KILLED_MESSAGE
        self._log.read()
        said = error_line(self._log.tail, crashed=True)
        if ending is None:
            return "failed", said or KILLED_MESSAGE
        status, message = ending
        return status, message if status == "stopped" else said or message

    def _kill_run(self) -> None:
        """The run did not stop within the grace period: end its process (here; a run on another
        machine is left to its own stop)."""
        self._killed = True
        process = live_process(self.run_dir) if isinstance(self.backend, HereBackend) else None
        if process is not None and process.host == socket.gethostname():
            try:
                os.kill(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def _finish(self, status: str, message: str) -> None:
        if self._done:
            return
        if self._held and status != DETACHED:  # after the history being folded and the events after it
            if not any(kind == _END for kind, _ in self._held):
                self._held.append([_END, (status, message)])
            return
        self._held.clear()  # letting go: nothing more is shown
        self._done = True
        self._retry.stop()
        self._kill_timer.stop()
        self._log.read()
        self._log.stop()
        self._say("")
        if status == DETACHED or not self._remote_log.is_running():  # said before detach() returns
            self._remote_log.stop()
            self.ended.emit(status, message)
        else:
            self._remote_log.end(lambda: self.ended.emit(status, message))


def _fold_history(send: Send, value: dict) -> None:
    """On a Background thread: a ``history`` line folded as Open folds a long run's pyramid."""
    try:
        head = decode_history(value)
    except ValueError as exc:
        send((_LOG, f"the run's history could not be read ({exc}): the charts show its last steps only"))
        return
    send((_HISTORY, long_history(head.view, head.started, head.first_started)))


def _start_line(send: Send, run_dir: str, scheduled: bool) -> None:
    """On a Background thread: the line a resumed run's attach starts at (see ``_on_started``)."""
    send(count_lines(Path(run_dir) / EVENTS_FILE) if scheduled else last_start_line(run_dir))


def run_check(send: Send, run_dir: str, backend: RunBackend | None, stopping: bool) -> None:
    """On a Background thread, once ``attach`` said the run's process is gone: sends None when
    the run may still go on (a process holds its lock, or its scheduler's job is active), else
    ``(ending, finished)``: what its scheduler says of the end (None: nothing; see ``_gone``), and
    the status and message of the run_finished its events end with (None: they end without one)."""
    here = backend if isinstance(backend, HereBackend) else None
    if live_process(run_dir) is not None or (here is not None and here.job_active()):
        send(None)
        return
    finished = None
    if here is not None:
        try:
            status = summarize_events(run_dir)  # summary.json's offset: only the lines after it are read
        except OSError:
            status = None
        if status is not None and status.status not in ("new", "interrupted"):
            finished = (status.status, status.message or "")
    send((here.ending(stopping) if here is not None else None, finished))
