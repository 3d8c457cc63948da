"""The command line says what it did not understand instead of opening the window."""
from __future__ import annotations

import subprocess

import pytest

from gui_app.identity import app_command, app_env
from gui_app.launcher.gui_args import check

COMMANDS = ("train", "resume", "evaluate", "inspect", "devices", "export", "predict")


def test_typo_of_a_command_exits_2_with_did_you_mean():
    proc = subprocess.run(app_command("trian", "config.json"), capture_output=True, text=True, timeout=60,
                          env=app_env({"QT_QPA_PLATFORM": "offscreen"}))
    assert proc.returncode == 2 and proc.stdout == ""
    (line,) = proc.stderr.splitlines()
    assert line.startswith("replica-studio: unknown command 'trian' (did you mean 'train'?); commands: train, ")


@pytest.mark.parametrize("argv, message", [
    (["evalute", "run"], "unknown command 'evalute' (did you mean 'evaluate'?)"),
    (["frobnicate"], "unknown command 'frobnicate'; commands:"),
    (["--runs-dir", "/tmp", "stray"], "unexpected argument 'stray'"),
    (["--confg", "x.json"], "unknown option '--confg' (did you mean '--config'?)"),
    (["--bogus"], "unknown option '--bogus' (replica-studio"),
    (["--config"], "option '--config' needs a value"),
])
def test_what_the_window_refuses(argv, message):
    problem = check(argv, COMMANDS)
    assert problem is not None and message in problem


@pytest.mark.parametrize("argv", [
    [], ["--runs-dir", "/tmp/runs"], ["--config=c.json"], ["-platform", "offscreen"], ["-style=fusion"],
    ["--style", "fusion", "-reverse"], ["-geometry", "800x600+0+0", "-display", ":1", "--measure-startup"],
    ["--config", "c.json", "--train", "--measure-startup"],
])
def test_qt_and_app_options_pass_through(argv):
    assert check(argv, COMMANDS) is None
