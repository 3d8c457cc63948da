"""RemoteLog: the Log tab's view of a host's run's own log (its ``engine.log`` there).

A run here has its ``engine.log`` followed from the file (the attachment's log tail); a run on an
SSH host has it there, so it is followed by ``replica-studio log RUN_DIR --follow --json --from N``
run over ssh (gui_app/engine/commands/log.py): each line comes with the byte it ends at, so after a
dropped connection it goes on from there (:meth:`follow` again, which the attachment calls at
each attach), no line lost or twice. It ends by itself once the run's process is gone there, and
with its ssh client (its input ends there) when the window lets go.

    line(str)     one line of the run's log
"""
from __future__ import annotations

from typing import Callable

from PySide6.QtCore import QObject, QTimer, Signal

from gui_app.core.answers import LogLine, decode
from gui_app.ui.workers.process import EngineProcess

END_WAIT_MS = 2000  # the run has ended: its log's last lines come within a poll (0.25 s) and a round trip


class RemoteLog(QObject):
    line = Signal(str)

    def __init__(self, command: Callable[[str], list[str]], from_end: bool, parent: QObject | None = None) -> None:
        """``command(start)``: the ``log --follow --json --from START`` command line (over ssh);
        ``from_end``: what the run logged before is not this window's (as for a run here)."""
        super().__init__(parent)
        self._command = command
        self.offset: int | None = None if from_end else 0  # the bytes of the log read so far (None: its end)
        self._process = EngineProcess(self)
        self._process.json_event.connect(self._take)
        self._process.finished.connect(self._on_finished)
        self._then: Callable[[], None] | None = None
        self._end_timer = QTimer(self, singleShot=True, interval=END_WAIT_MS)
        self._end_timer.timeout.connect(self.stop)

    def follow(self) -> None:
        """Follow the log from where it was left (nothing when it is followed already)."""
        if not self._process.is_running() and self._then is None:
            self._process.start(self._command("end" if self.offset is None else str(self.offset)))

    def is_running(self) -> bool:
        return self._process.is_running()

    def end(self, then: Callable[[], None]) -> None:
        """The run has ended: let the follower print its last lines and end on its own (ended
        after END_WAIT_MS otherwise), then call ``then``."""
        self._then = then
        if self._process.is_running():
            self._end_timer.start()
        else:
            self._on_finished()

    def stop(self) -> None:
        """End the follower now (its ssh client: the command there sees its input end)."""
        self._process.kill()

    def _take(self, value: dict) -> None:
        answer = decode(LogLine, value)
        if answer is not None and answer.type == LogLine.TYPE:
            self.offset = answer.next
            if answer.line is not None:  # not the first answer to --from end, which says where that was
                self.line.emit(answer.line)

    def _on_finished(self, *_end: object) -> None:
        self._end_timer.stop()
        then, self._then = self._then, None
        if then is not None:
            then()
