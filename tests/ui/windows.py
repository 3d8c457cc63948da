"""Driving the main window in tests: a run from Train to its end, as the user starts it, and
whether a process the window started (or let go of) still runs."""
from __future__ import annotations

import os

from run_dirs import wait_listed


def train(qtbot, window, timeout: int = 15_000) -> tuple[str, str, str]:
    """Run → Train, until the run ends and the run list has read it again: (status, run_dir, message)."""
    with qtbot.waitSignal(window.supervisor.finished, timeout=timeout) as finished:
        window.actions.train.trigger()
    wait_listed(qtbot, window.runs)  # the run list reads the finished run again, off the GUI thread
    return tuple(finished.args)


def alive(pid: int) -> bool:
    """Whether process ``pid`` exists (QProcess reaps what the window started; a detached run is
    no child of the test)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
