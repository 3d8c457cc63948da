"""``replica-studio`` without a sub-command: the desktop app."""
from __future__ import annotations

import argparse
import os
import signal
import sys
import traceback

from gui_app.ui import gc_guard
from gui_app.ui.options import WINDOW_OPTIONS

os.environ.setdefault("PYQTGRAPH_QT_LIB", "PySide6")  # PySide6 before pyqtgraph (docs/architecture.md, "Qt facts")


def _parse(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    parser = argparse.ArgumentParser(prog="replica-studio", description=(
        "Replica Studio: distributed TensorFlow training that shows every replica live. "
        "Sub-commands (train, resume, evaluate, inspect, devices) run the engine from the command line."))
    for option in WINDOW_OPTIONS:
        if option.value is None:
            parser.add_argument(option.name, action="store_true", help=option.help)
        else:
            parser.add_argument(option.name, metavar=option.value, help=option.help)
    # Unknown options are Qt's own (-platform, -style, ...): pass them on to QApplication.
    return parser.parse_known_args(argv)


def polish_application(app) -> None:
    """Application-wide look. Qt's default palettes paint the placeholder text of a disabled
    line edit black (QPalette Disabled/PlaceholderText), so an inapplicable field locked
    during a run looked filled in; use the disabled text colour instead."""
    from PySide6.QtGui import QPalette

    app.setApplicationName("Replica Studio")
    app.setOrganizationName("replica-studio")
    app.setDesktopFileName("replica-studio")
    palette = app.palette()
    disabled = QPalette.ColorGroup.Disabled
    palette.setColor(disabled, QPalette.ColorRole.PlaceholderText, palette.color(disabled, QPalette.ColorRole.Text))
    app.setPalette(palette)


def _close_on_termination(app, window) -> None:
    """Ctrl+C in the terminal or SIGTERM from the session closes the window the normal way:
    a running engine is stopped cooperatively, then killed after its grace period.
    Python runs signal handlers only when it has control, so a timer lends it some."""
    from PySide6.QtCore import QTimer

    def on_signal(*_: object) -> None:
        QTimer.singleShot(0, window.close_without_asking)

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, on_signal)
    tick = QTimer(app, interval=250)
    tick.timeout.connect(lambda: None)
    tick.start()


def run_gui(argv: list[str]) -> int:
    """Open the main window; returns the exit code. Startup errors show in a dialog."""
    try:
        args, qt_args = _parse(list(argv))
    except SystemExit as exc:  # --help, or a bad option (argparse has printed why)
        return int(exc.code or 0)

    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication, QMessageBox

    app = QApplication.instance() or QApplication([sys.argv[0] if sys.argv else "replica-studio", *qt_args])
    polish_application(app)
    gc_guard.install(app)  # Python's collector runs on the GUI thread only
    try:
        from gui_app.core.config import ConfigError
        from gui_app.ui.window.main_window import MainWindow

        window = MainWindow(runs_dir=args.runs_dir)
        config_error = None
        if args.config:
            try:
                window.files.load_config_file(args.config)
            except ConfigError as exc:
                config_error = str(exc)
        window.show()
        # --train: never the previous config when --config failed, nor an invalid one
        if args.train and config_error is None and window.config_panel.config() is not None:
            window.run.train_at_launch()
        else:
            if args.train and config_error is None:
                config_error = "The configuration is not valid, so training did not start: fix it and press Train."
            window.start()
        _close_on_termination(app, window)
        QTimer.singleShot(0, gc_guard.freeze_startup)  # after the first paint: the window is built
    except Exception as exc:  # noqa: BLE001 - any startup failure goes to a dialog, not a lost console
        traceback.print_exc()
        QMessageBox.critical(None, "Replica Studio cannot start", f"{type(exc).__name__}: {exc}")
        return 1
    if config_error:
        QMessageBox.warning(window, "Cannot load the configuration", config_error)
    code = app.exec()
    window.close()  # normally closed already; this also covers app.quit() from elsewhere
    window.supervisor.close()
    return code
