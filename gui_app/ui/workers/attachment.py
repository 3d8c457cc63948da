"""Attachment: the window's hold on a run that lives on its own (docs/detached.md, "In the
window"; a run on an SSH host: docs/hosts.md, "In the window").

A short job starts the run (``train CONFIG --detach``, ``resume RUN_DIR --detach``:
:class:`DetachedStart`, whose answer is the run directory or the run's own error line), then
``attach RUN_DIR --from N`` follows it as a :class:`~gui_app.ui.workers.run_job.RunJob`: events
on its stdout, control words on its stdin. The window's process is never the run's parent, so
nothing the window does to its own processes -- closing, crashing, a ``kill -9`` -- reaches it.

It counts the lines it has (``N``; after a history line, from its byte, in the file of its inode:
``--from-byte B --from N --inode I``), so when ``attach`` ends while the run goes on it attaches
again from there, after 0.5 s doubling to 10 s: no step lost, none shown twice; attach's exit 3
(a resume replaced the file) asks for the history again. Whether the run goes on is its lock's
word (gui_app/core/live_runs.py) or its scheduler's (gui_app/core/backends/), asked on a thread;
a run gone without run_finished failed with its own error line (the last of ``engine.log``).
On an SSH host, ``attach`` there runs over the system ``ssh``, not ``attach --host``: ssh's exit
255 then says the connection failed (the run goes on: "connection to HOST lost, reconnecting…",
for as long as it takes), attach's 1 that the run's process is gone; its log comes from ``log
--follow`` there (:class:`~gui_app.ui.workers.remote_log.RemoteLog`), before ``ended``.

    arrived(Event)    every event after line N, decoded once (RunJob)
    history(RunHistory)  a long run's history from its pyramid (``history=True``: ``attach
                      --history``), folded on a thread as Open folds it, before the events after
                      it; again, replacing what was shown, when a resume replaced the file
    log_line(str)     the run's log, the attach process's stderr
    notice(str)       "following the run again…" (over ssh: "connection to HOST lost,
                      reconnecting…") while it re-attaches; "" once attached again
    ended(str, str)   once: the status and message of run_finished; ``failed`` with the run's
                      error line when its process is gone without one, or a start that failed;
                      ``interrupted`` when it had to be killed; ``detached`` when the window let go
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from PySide6.QtCore import QObject, QTimer, Signal

from gui_app.core.backends import HereBackend, RunBackend, backend_for
from gui_app.core.engine_output import EXIT_OK, error_line
from gui_app.core.events import Event, RunFinished, RunStarted
from gui_app.core.history import RunHistory
from gui_app.core.ssh import CONNECT_TIMEOUT_S, RECONNECT_TIMEOUT_S, SSH_FAILED, HostError
from gui_app.core.ssh_hosts import Host
from gui_app.ui.workers import attach_reads
from gui_app.ui.workers.background import Background
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
# attach exits 1 once the run's process is gone and every line is out, 2 on a bad run directory
# (docs/detached.md); any other end of attach (a kill, a dropped connection: 255) is not the run's.
ATTACH_RUN_GONE, ATTACH_BAD_INPUT = 1, 2
# attach --inode exits 3 when the events file is not the one its byte and lines were counted in (a
# resume replaced it): the history is asked for again, and replaces what the window shows
ATTACH_REPLACED = 3
NOT_STARTED = RunJob.NOT_STARTED


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
        self._order = attach_reads.InOrder(self._tell)  # what comes while a history is folded on a thread waits for it
        # where the run lives, decided once its directory is known (a start answers it)
        self.backend: RunBackend | None = backend_for(run_dir, host) if run_dir else None
        self._starter: DetachedStart | None = None
        self._job: RunJob | None = None
        self._from = 0  # the line the current attach started at
        self._backoff = attach_reads.Backoff()
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
            self._background.run(attach_reads.start_line, self.run_dir, backend.scheduled, deliver=self._on_start_line,
                                 name="start-line")
        else:
            self._log.follow(backend, from_end=self.lines > 0)
            self._attach_started()

    def _on_start_line(self, start: tuple[int, int]) -> None:
        if self._done:  # it let go while the file was read
            return
        line, byte = start
        self._byte, self.lines = (byte, 0) if byte else (0, line)
        if isinstance(self.backend, HereBackend):
            self._log.follow(self.backend, from_end=line > 0)
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
        self._backoff.attempt()
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
            self._backoff.reset()
            self._say("")

    def _say(self, notice: str) -> None:
        if notice != self._notice:
            self._notice = notice
            self.notice.emit(notice)

    def _on_event(self, event: Event) -> None:
        if self._reset:  # its replaced file came without a history line (a short run): all its lines, from none
            self._reset = False
            self._order.out(attach_reads.HISTORY, RunHistory())
        self.lines = self._from + self._job.lines_read if self._job is not None else self.lines + 1
        if self._notice:  # attached again: its first event says so
            self._backoff.reset()
            self._say("")
        if isinstance(event, (RunStarted, RunFinished)) and event.run_dir:
            self.run_dir = self.run_dir or event.run_dir
        self._order.out(attach_reads.EVENT, event)

    def _on_history(self, value: dict) -> None:
        """``attach --history``'s first line: the history as Open shows it, folded on a thread (up
        to ~1 s for 2,000 buckets of 8 replicas; the events and the end wait for it), the byte of
        events.jsonl its events go on from and the file's inode (``--from-byte``, ``--inode``)."""
        self._reset = False  # it replaces what was shown
        offset, inode = value.get("offset"), value.get("inode")
        if isinstance(offset, int) and offset >= 0:
            self._byte, self._from, self.lines = offset, 0, 0
            self._inode = inode if isinstance(inode, int) and inode > 0 else 0
        folded = self._order.later()
        self._background.run(attach_reads.fold_history, value, deliver=folded, name="history-fold",
                             failed=lambda exc: folded((attach_reads.LOG, attach_reads.HISTORY_UNREADABLE.format(exc))))

    # ---- what the window is told, in order --------------------------------------------------------
    def _tell(self, kind: str, value: Any) -> None:
        if kind == attach_reads.EVENT:
            self.arrived.emit(value)
        elif kind == attach_reads.HISTORY:
            self.history.emit(value)
        elif kind == attach_reads.LOG:
            self.log_line.emit(value)
        else:  # END: the last thing held
            self._order.clear()
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
            self._background.run(attach_reads.run_check, self.run_dir, self.backend, self._stopping,
                                 deliver=self._on_run_checked, name="run-check")
        else:  # killed, or its connection dropped: the run may go on
            self._reattach_later()

    def _history_again(self) -> None:
        """The run's events file was replaced since its lines were counted (a resume): no count of
        the old file says where it goes on. Its history, asked for again, replaces what was shown."""
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
        self._retry.start(self._backoff.next_ms(counts_attempt=self.remote))

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
        if isinstance(self.backend, HereBackend):
            attach_reads.kill_here(self.run_dir)

    def _finish(self, status: str, message: str) -> None:
        if self._done:
            return
        if self._order and status != DETACHED:  # after the history being folded and the events after it
            self._order.end_later((status, message))
            return
        self._order.clear()  # letting go: nothing more is shown
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

