"""The desktop app's own command-line options, in one table: the window's parser
(gui_app/ui/application.py) adds them, ``replica-studio --help`` lists them (gui_app/app.py) and
the argument check refuses anything else that is not Qt's (gui_app/launcher/gui_args.py).

Plain data: no Qt, no TensorFlow, so the launcher reads it before either loads.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class WindowOption:
    name: str  # "--runs-dir"
    value: str | None  # what its value is called in the help ("DIR"); None: a flag
    help: str


WINDOW_OPTIONS = (
    WindowOption("--runs-dir", "DIR", "folder of run directories (default: the user data folder, or "
                                      "$REPLICA_STUDIO_RUNS_DIR)"),
    WindowOption("--config", "FILE", "fill the forms from this run configuration (JSON)"),
    WindowOption("--train", None, "start training the configuration in the forms (the last one, or --config FILE) "
                                  "as the window opens"),
    WindowOption("--measure-startup", None, "open the window, print the time from launch to its first paint (JSON), "
                                            "quit; with --train, wait for the run's first finished step and print "
                                            "that too"),
)
