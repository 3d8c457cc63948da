"""What may follow ``replica-studio`` when it opens the window: the app's options and Qt's own.

Anything else is a mistake (``replica-studio trian config.json``): without this check Qt would
swallow it and open the window, which on a server hangs or fails on the display instead of
saying what was wrong. TensorFlow- and Qt-free.
"""
from __future__ import annotations

import difflib

from gui_app.ui.options import WINDOW_OPTIONS

# The window's options that take a value, and those that do not.
APP_VALUE_OPTIONS = tuple(option.name for option in WINDOW_OPTIONS if option.value is not None)
APP_FLAGS = tuple(option.name for option in WINDOW_OPTIONS if option.value is None)
# QGuiApplication/QApplication command-line options (Qt 6 documentation), with a value or not.
QT_VALUE_OPTIONS = ("-platform", "-platformpluginpath", "-platformtheme", "-plugin", "-qwindowgeometry",
                    "-qwindowicon", "-qwindowtitle", "-session", "-display", "-geometry", "-style", "-stylesheet",
                    "-name", "-title", "-visual", "-qmljsdebugger", "-fn", "-font", "-bg", "-background",
                    "-fg", "-foreground", "-btn", "-button", "-im", "-inputstyle")
QT_FLAGS = ("-reverse", "-widgetcount", "-nograb", "-dograb", "-sync", "-ncols", "-cmap")


def _option(arg: str) -> tuple[str, bool]:
    """(name, value attached with '='); Qt also takes its options with two dashes."""
    name, eq, _ = arg.partition("=")
    if name.startswith("--") and ("-" + name[2:]) in QT_VALUE_OPTIONS + QT_FLAGS:
        name = name[1:]
    return name, bool(eq)


def check(argv: list[str], commands: tuple[str, ...]) -> str | None:
    """None when ``argv`` can open the window, else the one line that says what is wrong."""
    known = APP_VALUE_OPTIONS + APP_FLAGS + QT_VALUE_OPTIONS + QT_FLAGS
    i = 0
    while i < len(argv):
        arg = argv[i]
        if not arg.startswith("-") or arg == "-":
            if i == 0:
                close = difflib.get_close_matches(arg, commands, n=1, cutoff=0.6)
                hint = f" (did you mean '{close[0]}'?)" if close else ""
                return (f"unknown command '{arg}'{hint}; commands: {', '.join(commands)} "
                        "(replica-studio --help for more)")
            return f"unexpected argument '{arg}'; the desktop app takes only options (replica-studio --help)"
        name, attached = _option(arg)
        if name in APP_VALUE_OPTIONS + QT_VALUE_OPTIONS:
            if not attached:
                if i + 1 >= len(argv):
                    return f"option '{name}' needs a value"
                i += 1
        elif name not in APP_FLAGS + QT_FLAGS:
            close = difflib.get_close_matches(name, known, n=1, cutoff=0.75)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            return f"unknown option '{arg}'{hint} (replica-studio --help lists the options)"
        i += 1
    return None
