"""The ``replica-studio`` command: the desktop app without a sub-command, the engine's
command line with one (``train``, ``resume``, ``evaluate``, ``devices``, ...).

The same dispatch runs in a PyInstaller bundle, whose executable is also the engine:
``engine_command`` there is ``[bundle executable, train, ...]``.

Nothing here imports Qt or TensorFlow at module level, so ``replica-studio devices`` never
loads Qt and the window appears before TensorFlow is imported.
"""
from __future__ import annotations

import os
import sys
import textwrap
import time

LAUNCHED_AT = time.monotonic()  # as early as our code runs: --measure-startup counts from here

APP_OPTIONS = (
    ("--selftest", "check this installation: start, detect devices, train a few steps of the bundled "
                   "digits headless, report; exit 0 when all is well"),
    ("--install-desktop-entry", "add Replica Studio to your application menu (a .desktop file and icons "
                                "in $XDG_DATA_HOME, default ~/.local/share)"),
    ("--uninstall-desktop-entry", "remove what --install-desktop-entry added"),
)


def _frozen_setup() -> None:
    """What a PyInstaller executable needs before anything else runs."""
    if not getattr(sys, "frozen", False):
        return
    # A windowed (no console) Windows executable has no std streams; printing must not crash.
    # (multiprocessing.freeze_support() is called by the bundle's entry script, before this.)
    for name in ("stdout", "stderr"):
        if getattr(sys, name) is None:
            setattr(sys, name, open(os.devnull, "w", encoding="utf-8"))  # open as long as the process


def _print_help() -> int:
    from gui_app.engine.commands.cli import main as cli_main

    try:
        cli_main(["--help"])
    except SystemExit:
        pass
    from gui_app.ui.options import WINDOW_OPTIONS

    print("\ndesktop app options (without a command):")
    options = [(f"{o.name} {o.value}" if o.value else o.name, o.help) for o in WINDOW_OPTIONS] + list(APP_OPTIONS)
    for option, text in options:
        print(textwrap.fill(text, width=100, initial_indent=f"  {option:<27}", subsequent_indent=" " * 29))
    return 0


def main(argv: list[str] | None = None) -> int:
    whole_process = argv is None  # the program's own command line: its run may end the process
    argv = list(sys.argv[1:] if argv is None else argv)
    _frozen_setup()
    from gui_app.engine.commands.cli import SUBCOMMANDS

    first = argv[0] if argv else None
    if first in SUBCOMMANDS or first == "--version":
        from gui_app.engine.commands.cli import main as cli_main
        from gui_app.engine.run.exits import RUN_COMMANDS, exit_now

        code = cli_main(argv)
        if whole_process and first in RUN_COMMANDS:
            exit_now(code)  # skip TensorFlow's teardown (exits.py)
        return code
    if first in ("-h", "--help"):
        return _print_help()
    if first == "--selftest":
        from gui_app.launcher.selftest import main as selftest_main

        return selftest_main(argv[1:])
    if first in ("--install-desktop-entry", "--uninstall-desktop-entry"):
        from gui_app.launcher.desktop_entry import main as desktop_entry_main

        return desktop_entry_main(argv)
    from gui_app.launcher import startup

    if first == startup.PROBE_FLAG:  # internal: the child process of the startup check
        return startup.probe_qt(argv[1:])
    from gui_app.launcher.gui_args import check

    problem = check(argv, SUBCOMMANDS)
    if problem:
        print(f"replica-studio: {problem}", file=sys.stderr)
        return 2
    return startup.launch_gui(argv, launched_at=LAUNCHED_AT)
