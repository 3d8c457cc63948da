"""Desktop notifications when a run ends (completed, stopped, failed -- a NaN loss fails the run,
and the notice then says the diagnosis's sentence: which replica went first, what to do), when the
run the window follows stalls (gui_app/ui/window/stall_watch.py), and when a sweep the window
follows ends (completed, stopped, or its process failed).

Two ways to reach the desktop, the first that exists:

- the freedesktop notification service (``org.freedesktop.Notifications`` on the session bus:
  GNOME, KDE, Xfce, dunst, mako), called through ``gdbus`` (GLib's command-line D-Bus client,
  installed wherever GLib is). PySide6's QtDBus cannot marshal the call's ``u`` and ``a{sv}``
  arguments from Python (docs/architecture.md, "Qt facts"), and gdbus takes them typed;
- the system tray's message (``QSystemTrayIcon``: Windows and macOS, and Linux panels with a tray).

The call never blocks the window: gdbus runs as a QProcess that nobody waits for. A notification
is sent only while the window is not the active one (the user is elsewhere); a setting turns them
off (Run -> Notify when a run or sweep ends).
"""
from __future__ import annotations

import logging
import os
import shutil
import sys
from typing import Callable

from PySide6.QtCore import QCoreApplication, QObject, QProcess, QProcessEnvironment
from PySide6.QtGui import QIcon
from PySide6.QtWidgets import QApplication, QSystemTrayIcon, QWidget

from gui_app.core.answers import Finding
from gui_app.core.rundir import read_eval
from gui_app.ui.workers.attachment import DETACHED

log = logging.getLogger(__name__)

SERVICE = "org.freedesktop.Notifications"
PATH = "/org/freedesktop/Notifications"
# The freedesktop spec's urgency hint: 1 normal, 2 critical (a critical one stays until clicked).
NORMAL, CRITICAL = 1, 2


def gvariant_string(text: str) -> str:
    """``text`` as a GVariant text-format string literal (what gdbus parses)."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n") + "'"


def freedesktop_command(app_name: str, summary: str, body: str, urgency: int) -> list[str]:
    """gdbus's ``Notify`` call, every argument typed as the spec's signature ``susssasa{sv}i``."""
    return ["call", "--session", "--dest", SERVICE, "--object-path", PATH, "--method", f"{SERVICE}.Notify",
            gvariant_string(app_name), "uint32 0", gvariant_string(""), gvariant_string(summary),
            gvariant_string(body), "@as []", f"{{'urgency': <byte {urgency}>}}", "int32 -1"]


def session_bus_available() -> bool:
    # Desktop sessions export the address (dbus-launch, or systemd's user bus via pam_systemd).
    return bool(os.environ.get("DBUS_SESSION_BUS_ADDRESS"))


class DesktopNotifier(QObject):
    """Sends notifications the first way the desktop has (see the module docstring)."""

    def __init__(self, icon: QIcon, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._icon = icon
        self._tray: QSystemTrayIcon | None = None
        self._gdbus = shutil.which("gdbus") if sys.platform.startswith("linux") else None

    def way(self) -> str:
        """``freedesktop``, ``tray`` or "" (none: nothing is sent)."""
        if self._gdbus and session_bus_available():
            return "freedesktop"
        if QSystemTrayIcon.isSystemTrayAvailable() and QSystemTrayIcon.supportsMessages():
            return "tray"
        return ""

    def notify(self, summary: str, body: str, urgent: bool = False) -> bool:
        way = self.way()
        if way == "freedesktop":
            process = QProcess(self)
            process.setProcessEnvironment(QProcessEnvironment.systemEnvironment())
            process.setStandardOutputFile(QProcess.nullDevice())
            process.finished.connect(lambda code, _status, p=process: self._on_gdbus_done(p, code))
            process.errorOccurred.connect(lambda _error, p=process: p.deleteLater())
            urgency = CRITICAL if urgent else NORMAL
            process.start(self._gdbus or "gdbus",
                          freedesktop_command(QCoreApplication.applicationName(), summary, body, urgency))
        elif way == "tray":
            if self._tray is None:
                self._tray = QSystemTrayIcon(self._icon, self)
            self._tray.show()  # a tray message needs a visible icon
            level = QSystemTrayIcon.MessageIcon.Critical if urgent else QSystemTrayIcon.MessageIcon.Information
            self._tray.showMessage(summary, body, level)
        else:
            log.info("no desktop notification service; not sent: %s", summary)
            return False
        return True

    @staticmethod
    def _on_gdbus_done(process: QProcess, code: int) -> None:
        if code != 0:  # no service on the bus, or it refused the call: say so in the log, once per call
            error = bytes(process.readAllStandardError().data()).decode(errors="replace").strip()
            log.info("desktop notification not shown: %s", error.splitlines()[-1] if error else f"gdbus exit {code}")
        process.deleteLater()


def run_notice(status: str, run_dir: str, message: str, test_accuracy: float | None = None) -> tuple[str, str, bool]:
    """The summary, body and urgency of the notice for a run that ended."""
    name = os.path.basename(os.path.normpath(run_dir)) if run_dir else "the run"
    if status == "completed":
        accuracy = "" if test_accuracy is None else f": test accuracy {100 * test_accuracy:.2f} %"
        return "Training completed", f"{name}{accuracy}", False
    if status == "stopped":
        return "Training stopped", f"{name}: stopped with a checkpoint" + (f" ({message})" if message else ""), False
    return "Training failed", f"{name}: {message}" if message else name, True


def finding_notice(kind: str, run_dir: str, sentence: str) -> tuple[str, str, bool]:
    """The summary, body and urgency of the notice for a run's finding (``non_finite``, ``stall``):
    the diagnosis's own sentence."""
    name = os.path.basename(os.path.normpath(run_dir)) if run_dir else "the run"
    summary = {"non_finite": "Training diverged", "stall": "Training stalled"}.get(kind, "Training: " + kind)
    return summary, f"{name}: {sentence}", True


def sweep_notice(kind: str, sweep_dir: str, line: str) -> tuple[str, str, bool]:
    """The summary, body and urgency of the notice for a sweep that ended (``completed``,
    ``stopped`` or ``failed``); ``line`` is the sweep's own last words (gui_app/ui/sweep/figures.outcome)."""
    name = os.path.basename(os.path.normpath(sweep_dir))
    return f"Sweep {kind}", f"{name}: {line}" if line else name, kind == "failed"


class RunNotifications(QObject):
    """Notifies when a run or a sweep the window follows ends, while the window is not the active one."""

    def __init__(self, window: QWidget, notifier: DesktopNotifier, enabled: bool,
                 non_finite: Callable[[str], Finding | None] | None = None) -> None:
        super().__init__(window)
        self._window, self.notifier, self.enabled = window, notifier, enabled
        self._non_finite = non_finite  # a run's non-finite finding, by its folder (the window's history)

    def _elsewhere(self) -> bool:
        """Notices are on and the user is not looking at the window."""
        return self.enabled and not (self._window.isActiveWindow() and not self._window.isMinimized())

    def on_run_ended(self, status: str, run_dir: str, message: str) -> None:
        if status == DETACHED:  # the window let go of it: the run goes on
            return
        if not self._elsewhere():
            return
        found = self._non_finite(run_dir) if status == "failed" and self._non_finite is not None else None
        if found is not None:  # the run diverged: say where and what to do, not only that it failed
            self.notifier.notify(*finding_notice("non_finite", run_dir, found.message))
            return
        self.notifier.notify(*run_notice(status, run_dir, message, _test_accuracy(run_dir) if status == "completed"
                                         else None))

    def on_stalled(self, run_dir: str, sentence: str) -> None:
        """The run the window follows has stalled (StallWatch.stalled)."""
        if self._elsewhere():
            self.notifier.notify(*finding_notice("stall", run_dir, sentence))

    def on_sweep_ended(self, kind: str, sweep_dir: str, line: str) -> None:
        # The sweep has a window of its own: no notice while any of ours is the active one.
        if self.enabled and QApplication.activeWindow() is None:
            self.notifier.notify(*sweep_notice(kind, sweep_dir, line))


def _test_accuracy(run_dir: str) -> float | None:
    try:
        evaluation = read_eval(run_dir) if run_dir else None
    except ValueError:  # an unreadable eval.json: the notice goes without the figure
        return None
    return evaluation.accuracy if evaluation else None
