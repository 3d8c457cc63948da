"""Driving the main window in tests: one shown and closed, a run from Train to its end, as the
user starts it, and whether a process the window started (or let go of) still runs."""
from __future__ import annotations

import contextlib
import os

from run_dirs import wait_listed


@contextlib.contextmanager
def shown_window(qtbot, **options):
    """A main window (``MainWindow(**options)``), shown; closed at the end without asking about a
    run it follows (its supervisor lets go first). Not given to qtbot: qtbot closes its widgets
    before the fixtures' teardown, and a window following a run (a test that failed mid-run) would
    ask whether to keep the run -- a modal question nobody answers."""
    from gui_app.ui.window.main_window import MainWindow

    window = MainWindow(**options)
    window.show()
    try:
        yield window
    finally:
        window.supervisor.close()
        window.settings.confirm_close_during_run = False
        window.close()
        window.deleteLater()


def real_engine(fake_engine):
    """An engine command for a window that submits, attaches and resumes with the real engine,
    its device detection and dataset check faked (fast, and no TensorFlow beside the run)."""
    from gui_app.identity import app_command

    def engine(*args: str) -> list[str]:
        return fake_engine(*args) if args[0] in ("devices", "inspect") else app_command(*args)

    return engine


def train(qtbot, window, timeout: int = 15_000) -> tuple[str, str, str]:
    """Run → Train, until the run ends and the run list has read it again: (status, run_dir, message)."""
    with qtbot.waitSignal(window.supervisor.finished, timeout=timeout) as finished:
        window.window_actions.train.trigger()
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
