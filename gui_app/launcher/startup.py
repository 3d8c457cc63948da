"""Opening the window after a double-click: every failure is seen, none is a silent exit.

A double-clicked app has no terminal, so a startup failure must reach the user some other way:

- Qt cannot start (a missing system library, no display, no platform plugin): the problem
  is found by :mod:`gui_app.launcher.preflight` before Qt is touched, confirmed by starting Qt in a
  child process (``--probe-qt``; Qt aborts a process it cannot start), and reported as a
  plain message: one line on stderr, and a zenity/kdialog box or a notify-send
  notification when nobody reads stderr. A Qt fatal error the preflight missed is caught
  by a message handler that reports the same way before Qt aborts.
- Qt starts but the app cannot (TensorFlow is not installed, the UI fails to import): a
  dialog (gui_app.ui.application), and the reason on stderr.

``--measure-startup`` opens the window, prints when it was first painted, and quits (with
``--train``: when the run's first step has finished): the measurement behind
benchmarks/bench_startup.py, for an installed command or a bundle alike.
"""
from __future__ import annotations

import functools
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from typing import TYPE_CHECKING

from gui_app.core.engine_output import error_line
from gui_app.identity import APP_ID, app_command

if TYPE_CHECKING:
    from PySide6.QtWidgets import QApplication

TITLE = "Replica Studio cannot start"
EXIT_CANNOT_START = 1
PROBE_FLAG = "--probe-qt"
MEASURE_FLAG = "--measure-startup"
PROBE_TIMEOUT_S = 30


def system_env() -> dict[str, str]:
    """The environment for system programs (zenity, gtk-update-icon-cache, ...).

    A PyInstaller bootloader on Linux puts the bundle's folder first on LD_LIBRARY_PATH and
    keeps the user's value in LD_LIBRARY_PATH_ORIG; system programs must not load the
    bundle's copies of GLib or Qt."""
    env = dict(os.environ)
    if getattr(sys, "frozen", False):
        original = env.pop("LD_LIBRARY_PATH_ORIG", None)
        if original is None:
            env.pop("LD_LIBRARY_PATH", None)
        else:
            env["LD_LIBRARY_PATH"] = original
    return env


def report_plain(message: str, details: str | None = None) -> None:
    """Tell the user without Qt: stderr always; a desktop dialog or notification when stderr
    is not a terminal (a double-click), with whichever tool the desktop has."""
    print(f"replica-studio: cannot start: {message}", file=sys.stderr)
    if details:
        print(details.rstrip(), file=sys.stderr)
    sys.stderr.flush()
    if sys.stderr.isatty():
        return
    text = f"{message}\n\n{details.strip()}" if details and details.strip() else message
    if sys.platform == "win32":
        import ctypes

        ctypes.windll.user32.MessageBoxW(None, text, TITLE, 0x10)  # MB_ICONERROR
        return
    if sys.platform == "darwin":
        script = f"display alert {json.dumps(TITLE)} message {json.dumps(text, ensure_ascii=False)} as critical"
        _run_quietly(["osascript", "-e", script])
        return
    if not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        return  # no desktop to show anything on: stderr (the journal) is all there is
    for command in (["zenity", "--error", f"--title={TITLE}", "--no-markup", f"--text={text}"],
                    ["kdialog", "--title", TITLE, "--error", text],
                    ["notify-send", "--app-name=Replica Studio", f"--icon={APP_ID}", "--urgency=critical",
                     TITLE, text]):
        if shutil.which(command[0]) and _run_quietly(command):
            return


def _run_quietly(command: list[str]) -> bool:
    try:
        # No timeout: zenity and kdialog return when the user closes the box, which is the point.
        done = subprocess.run(command, env=system_env(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, check=False)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode in (0, 1)  # 1: the user closed zenity's box with Escape


def probe_qt_in_child(argv: list[str]) -> str | None:
    """Start Qt in a child process with these arguments. None if it starts; else what Qt
    said (its fatal message), or how the child ended."""
    try:
        done = subprocess.run(app_command(PROBE_FLAG, *argv), capture_output=True, text=True,
                              timeout=PROBE_TIMEOUT_S, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return f"Qt did not start within {PROBE_TIMEOUT_S} s"
    except OSError as exc:
        return f"cannot run {sys.executable}: {exc.strerror or exc}"
    if done.returncode == 0:
        return None
    return (error_line(done.stderr.splitlines(), crashed=done.returncode < 0)
            or f"the Qt check ended with code {done.returncode}")


def probe_qt(argv: list[str]) -> int:
    """``--probe-qt``: construct the QApplication and exit 0 (Qt aborts if it cannot)."""
    from PySide6.QtWidgets import QApplication

    QApplication([APP_ID, *argv])
    return 0


def _qt_message_handler(argv: list[str], earlier: list[str], kind, context, message: str) -> None:
    from PySide6.QtCore import QtMsgType

    category = getattr(context, "category", None)
    print(f"{category}: {message}" if category and category != "default" else message, file=sys.stderr)
    if kind == QtMsgType.QtFatalMsg:
        from gui_app.launcher import preflight

        report_plain("Qt failed to start: " + preflight.explain_qt_failure(message, argv, earlier=earlier))
    earlier.append(message.strip())  # the cause often comes before the fatal line


def create_application(argv: list[str]) -> QApplication:
    """The QApplication, with Qt's fatal errors reported plainly while it starts up.

    argv[0] becomes the app id: Qt's xcb plugin uses it as the WM_CLASS instance, which is
    how the desktop matches the window to the desktop entry's StartupWMClass."""
    from PySide6.QtCore import qInstallMessageHandler
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance()
    if not isinstance(app, QApplication):  # none yet (a test's is reused)
        qInstallMessageHandler(functools.partial(_qt_message_handler, argv, []))
        try:
            app = QApplication([APP_ID, *argv])
        finally:
            qInstallMessageHandler(None)
    from gui_app.ui.shell import apply_identity

    apply_identity(app)
    return app


def launch_gui(argv: list[str], launched_at: float | None = None) -> int:
    """Open the main window (gui_app.ui.application.run_gui) or explain why it cannot open.
    ``launched_at`` (time.monotonic) is when the command started, for --measure-startup."""
    launched_at = time.monotonic() if launched_at is None else launched_at
    measure = MEASURE_FLAG in argv
    argv = [a for a in argv if a != MEASURE_FLAG]
    from gui_app.launcher import preflight

    problem = preflight.check_qt(argv)
    if problem is not None:
        qt_said = probe_qt_in_child(argv)
        if qt_said is not None:
            report_plain(problem.message(), f"Qt said:\n{qt_said}")
            return EXIT_CANNOT_START
    app = create_application(argv)
    from gui_app.ui import shell

    if importlib.util.find_spec("tensorflow") is None:
        shell.show_error(
            TITLE, f"TensorFlow is not installed for {sys.executable}.",
            "Replica Studio trains with TensorFlow. Install it into the same environment:\n\n"
            f"    {sys.executable} -m pip install 'tensorflow>=2.21,<2.22'")
        return EXIT_CANNOT_START
    if measure:
        # parented to the app, which keeps it alive; with --train it waits for the first step
        shell.StartupTimer(app, launched_at, first_step="--train" in argv)
    try:
        from gui_app.ui.application import run_gui

        return run_gui(argv)
    except Exception as exc:  # noqa: BLE001 - a broken UI module must not end in silence
        import traceback

        details = traceback.format_exc()
        print(details, file=sys.stderr)
        shell.show_error(TITLE, f"{type(exc).__name__}: {exc}", details)
        return EXIT_CANNOT_START
