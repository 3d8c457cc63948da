"""Driving the main window in tests: a run from Train to its end, as the user starts it."""
from __future__ import annotations

from run_dirs import wait_listed


def train(qtbot, window, timeout: int = 15_000) -> tuple[str, str, str]:
    """Run → Train, until the run ends and the run list has read it again: (status, run_dir, message)."""
    with qtbot.waitSignal(window.supervisor.finished, timeout=timeout) as finished:
        window.actions.train.trigger()
    wait_listed(qtbot, window.runs)  # the run list reads the finished run again, off the GUI thread
    return tuple(finished.args)
