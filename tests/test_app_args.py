"""The command line says what it did not understand instead of opening the window."""
from __future__ import annotations

import subprocess

import pytest

from gui_app.identity import app_command, app_env
from gui_app.launcher.gui_args import check
from gui_app.ui.options import WINDOW_OPTIONS

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


@pytest.mark.parametrize("option", WINDOW_OPTIONS, ids=lambda option: option.name)
def test_each_window_option_is_checked_parsed_and_listed_from_one_table(option, capsys):
    from gui_app.app import main
    from gui_app.ui.application import _parse

    argv = [option.name, "x"] if option.value else [option.name]
    assert check(argv, COMMANDS) is None
    if option.value:
        assert check(argv[:1], COMMANDS) == f"option '{option.name}' needs a value"
    args, qt_args = _parse(argv)
    assert qt_args == [] and getattr(args, option.name[2:].replace("-", "_")) == ("x" if option.value else True)
    assert main(["--help"]) == 0
    listed = f"  {option.name} {option.value}" if option.value else f"  {option.name} "
    assert listed in capsys.readouterr().out
