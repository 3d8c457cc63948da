"""The ``replica-studio`` command: the desktop app without a sub-command, the engine's
command line with one (``train``, ``resume``, ``evaluate``, ``devices``, ...).

Nothing here imports Qt or TensorFlow at module level, so ``replica-studio devices`` never
loads Qt and the window appears before TensorFlow is imported.
"""
from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    from gui_app.engine.cli import SUBCOMMANDS

    if argv and (argv[0] in SUBCOMMANDS or argv[0] in ("-h", "--help", "--version")):
        from gui_app.engine.cli import main as cli_main

        return cli_main(argv)
    from gui_app.ui.main import run_gui

    return run_gui(argv)
