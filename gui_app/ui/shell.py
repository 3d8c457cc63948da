"""What the app needs around its main window: its identity on the desktop (icon, desktop
file name), the dialog for startup failures, and the first-paint timer of ``--measure-startup``.

Used by gui_app.launcher.startup, which creates the QApplication before gui_app.ui.application.run_gui
reuses it.
"""
from __future__ import annotations

import json
import os
import sys
import time

from PySide6.QtCore import QEvent, QObject, Qt, QTimer
from PySide6.QtGui import QIcon
from PySide6.QtWidgets import QApplication, QMainWindow, QMessageBox, QWidget

from gui_app.core.events import Step
from gui_app.identity import APP_ID, ICON_SIZES, resource_path


def app_icon() -> QIcon:
    """The application icon from the rendered PNGs (16 to 512 px; 16 and 24 are hinted)."""
    icon = QIcon()
    for size in ICON_SIZES:
        icon.addFile(str(resource_path("icons", "hicolor", f"{size}x{size}", "apps", f"{APP_ID}.png")))
    return icon


def apply_identity(app: QApplication) -> None:
    """Window icon for every window, and the id Wayland compositors (app_id) and KDE use to
    match the windows to the desktop entry."""
    app.setWindowIcon(app_icon())
    app.setDesktopFileName(APP_ID)


def show_error(title: str, text: str, details: str | None = None, parent: QWidget | None = None) -> None:
    """A modal error box; ``details`` go under "Show Details..." (tracebacks, commands)."""
    box = QMessageBox(QMessageBox.Icon.Critical, title, text, QMessageBox.StandardButton.Close, parent)
    if details:  # a few lines fit under the text; a traceback goes behind "Show Details..."
        (box.setInformativeText if details.count("\n") < 8 else box.setDetailedText)(details)
    box.exec()


def open_warning(title: str, text: str, parent: QWidget) -> QMessageBox:
    """A warning over ``parent``, window-modal but not blocking (a run's events keep arriving while
    it is read), deleted once closed; returned so a caller (a test) can look at it."""
    box = QMessageBox(QMessageBox.Icon.Warning, title, text, parent=parent)
    box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
    box.open()
    return box


def show_tensorflow_unavailable(message: str, parent: QWidget | None = None) -> None:
    """For a failed device detection: the engine could not start TensorFlow (a broken
    install, a CPU without AVX, a CUDA library mismatch), so nothing can train."""
    from gui_app.identity import app_command

    show_error("TensorFlow cannot start",
               f"TensorFlow failed to start, so Replica Studio cannot detect devices or train:\n\n{message}",
               f"Check it from a terminal with\n\n    {' '.join(app_command('devices', '--debug'))}\n\n"
               "and reinstall TensorFlow into the same environment if it fails "
               "(pip install --force-reinstall 'tensorflow>=2.21,<2.22').", parent)


def _process_age() -> float | None:
    """Seconds since the OS started this process (Linux), so interpreter start-up and a
    bundle's unpacking count too."""
    try:
        with open("/proc/self/stat", encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        started = int(fields[19]) / os.sysconf("SC_CLK_TCK")
        return time.clock_gettime(time.CLOCK_BOOTTIME) - started
    except (OSError, ValueError, IndexError, AttributeError):
        return None


class StartupTimer(QObject):
    """Prints one JSON line when the main window has been painted for the first time, then
    ends the event loop: ``{"painted_at": time.monotonic(), "since_process_start": s,
    "since_launch": s, "tensorflow_loaded": false}``.

    ``first_step`` (``--train``): the event loop goes on after that line until the window's run
    reports its first ``step`` event, then a second line ``{"first_step_at": ..., "since_launch":
    s, "tensorflow_loaded": false}`` is printed and the run is stopped, then the window closes. A run
    that finishes without a step prints ``{"error": message}`` and ends the loop with code 1."""

    def __init__(self, app: QApplication, launched_at: float, first_step: bool = False) -> None:
        super().__init__(app)
        self._app, self._launched_at, self._seen = app, launched_at, False
        self._first_step = first_step
        self._window: QWidget | None = None
        app.installEventFilter(self)

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt's name
        if (not self._seen and event.type() == QEvent.Type.Paint and isinstance(obj, QWidget)
                and isinstance(obj.window(), QMainWindow)):
            self._seen = True
            self._window = obj.window()
            # The paint pass that sent this event draws the whole window; report after it.
            QTimer.singleShot(0, self._report)
        return False

    def _report(self) -> None:
        now = time.monotonic()
        self._app.removeEventFilter(self)
        print(json.dumps({"painted_at": now, "since_process_start": _process_age(),
                          "since_launch": now - self._launched_at,
                          "tensorflow_loaded": "tensorflow" in sys.modules}), flush=True)
        supervisor = getattr(self._window, "supervisor", None)  # the MainWindow's (shell cannot import it)
        if not self._first_step or supervisor is None:
            self._app.exit(0)
            return
        supervisor.events.connect(self._on_events)
        supervisor.finished.connect(self._on_finished)

    def _on_events(self, events: list) -> None:
        if any(isinstance(e, Step) for e in events) and self._first_step:
            now = time.monotonic()
            self._first_step = False
            print(json.dumps({"first_step_at": now, "since_launch": now - self._launched_at,
                              "tensorflow_loaded": "tensorflow" in sys.modules}), flush=True)
            # The figure is taken: stop the run the way Ctrl+C does (checkpoint, then the window closes).
            # Only the MainWindow has a supervisor (checked above), and it has this method.
            close = getattr(self._window, "close_without_asking", None)
            if close is not None:
                close()

    def _on_finished(self, status: str, _run_dir: str, message: str) -> None:
        if self._first_step:
            self._first_step = False
            print(json.dumps({"error": f"the run {status} before its first step: {message}"}), flush=True)
            self._app.exit(1)
