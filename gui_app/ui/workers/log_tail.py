"""The Log tab's follower of a run on this machine: its ``engine.log`` (its stdout and stderr
while detached) or, for a Slurm run, its job's output -- whichever its backend says
(gui_app/core/backends). Polled on the window's event loop: the reading is the one line
follower's (gui_app/core/line_follow.py), so a line still being written comes out whole once
its newline is there. The last lines are kept to explain a failure."""
from __future__ import annotations

from collections import deque

from PySide6.QtCore import QObject, QTimer, Signal

from gui_app.core.backends import HereBackend
from gui_app.core.line_follow import LineFollower

LOG_POLL_MS = 250
LOG_TAIL = 200  # lines of the log kept to explain a failure


class LogTail(QObject):
    """Each new line of the run's log is a ``line``; :attr:`tail` keeps the last ones."""

    line = Signal(str)

    def __init__(self, parent: QObject) -> None:
        super().__init__(parent)
        self.tail: deque[str] = deque(maxlen=LOG_TAIL)
        self._follower: LineFollower | None = None
        self._timer = QTimer(self, interval=LOG_POLL_MS)
        self._timer.timeout.connect(self.read)

    def follow(self, backend: HereBackend, from_end: bool) -> None:
        """Follow the run's log from its start, or from its end now (what it logged before is not this window's)."""
        path = backend.log_path()
        if self._follower is not None and self._follower.path == path:
            return
        start = 0
        if from_end:
            try:
                start = path.stat().st_size
            except OSError:
                start = 0
        self.stop()
        self._follower = backend.log(start)
        self._timer.start()

    def read(self) -> None:
        if self._follower is None:
            return
        try:
            lines = self._follower.read()
        except OSError:
            return
        for raw in lines:
            text = raw.decode("utf-8", "replace").rstrip()
            if text.strip():
                self.tail.append(text.strip())
                self.line.emit(text)

    def stop(self) -> None:
        """Stop polling and let go of the file (what was read stays in :attr:`tail`)."""
        self._timer.stop()
        if self._follower is not None:
            self._follower.close()

