"""``--host``: the command line rebuilt for the host says what the user typed
(gui_app/engine/commands/on_host.py), whatever the options' order, abbreviation or values."""
from __future__ import annotations

import argparse
import json

import pytest

from gui_app.core.event_schema import stream_problems
from gui_app.core.ssh import STDIN_FILE
from gui_app.engine.commands.cli import build_parser
from gui_app.engine.commands.on_host import REMOTE_COMMANDS, command_arguments


def _subparser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[name]


def _comparable(args: argparse.Namespace) -> dict:
    return {k: v for k, v in vars(args).items() if k not in ("host", "on_host", "handler")}


@pytest.mark.parametrize("argv", [
    ["train", "cfg.json", "--host", "gpu1", "--events", "jsonl", "--control", "stdin", "--runs-dir", "-my runs"],
    ["train", "--host=gpu1", "--runs", "it's \"mine\"", "--allow-public-hosts", "--debug", "--", "-cfg.json"],
    ["resume", "/runs/a b", "--set", "training.learning_rate=0.5", "--set=training.epochs=3", "--host", "g"],
    ["evaluate", "--host", "g", "--events", "none", "/runs/x"],
    ["devices", "--json", "--cpu-devices", "2", "--host", "g"],
    ["inspect", "c.json", "--samples", "s.npz", "--json", "--host", "g"],
    ["export", "/runs/x", "--format", "tflite-int8", "-o", "out dir/m.tflite", "--check", "0", "--keep-failed",
     "--host", "g"],
    ["predict", "--top", "3", "--json", "--host", "g", "--", "/runs/x", "-seven.png", "two words.png"],
    ["predict", "--serve", "/runs/x", "--host", "g"],
    ["submit", "c.json", "--slurm", "--partition", "gpu", "--sbatch=--qos=long", "--sbatch", "-C a100",
     "--time", "1:00:00", "--gpus-per-node", "4", "--signal-seconds", "0", "--host", "login"],
    ["preflight", "c.json", "--json", "--runs-dir", "my runs", "--no-canary", "--host", "login"],
])
def test_the_rebuilt_command_line_parses_to_the_same_arguments(argv):
    parser = build_parser()
    args = parser.parse_args(argv)
    rebuilt = [args.command, *command_arguments(_subparser(parser, args.command), args, {})]
    assert "--host" not in " ".join(rebuilt) and "gpu1" not in rebuilt
    assert _comparable(parser.parse_args(rebuilt)) == _comparable(args)


def test_a_local_file_argument_becomes_the_stdin_file_and_outputs_a_path_there():
    parser = build_parser()
    args = parser.parse_args(["inspect", "local/c.json", "--samples", "local/s.npz", "--host", "g"])
    rebuilt = command_arguments(_subparser(parser, "inspect"), args,
                                {"config": STDIN_FILE, "samples": "/tmp/tmp.x/0/s.npz"})
    assert rebuilt == ["--samples", "/tmp/tmp.x/0/s.npz", "--", STDIN_FILE]


def test_every_remote_command_has_the_host_option_and_names_its_own_arguments():
    parser = build_parser()
    for name, remote in REMOTE_COMMANDS.items():
        dests = {a.dest for a in _subparser(parser, name)._actions}
        assert "host" in dests, name
        named = [remote.config, *remote.outputs, remote.stdin_flag]
        assert {d for d in named if d} <= dests, name


def test_a_run_refused_here_ends_as_the_engine_ends_a_refused_run(tmp_path, capsys):
    """A run that cannot go to its host (its config file is missing: no connection is made) writes
    its ``error`` and ``run_finished`` events, one line on stderr, and exits 2."""
    from gui_app.engine.commands.cli import main

    code = main(["train", str(tmp_path / "missing.json"), "--host", "gpu1", "--events", "jsonl"])
    out, err = capsys.readouterr()
    events = [json.loads(line) for line in out.splitlines()]
    assert code == 2 and [e["type"] for e in events] == ["error", "run_finished"] and stream_problems(events) == []
    assert events[0]["kind"] == "config" and events[1]["status"] == "failed"
    assert err == f"replica-studio train: {events[1]['message']}\n" and "missing.json" in err


def test_reconnect_is_ours_and_never_sent_there():
    parser = build_parser()
    args = parser.parse_args(["runs", "--host", "g", "--reconnect", "--json"])
    assert args.reconnect
    assert "--reconnect" not in command_arguments(_subparser(parser, "runs"), args, {})


def test_a_preview_that_cannot_come_back_is_a_warning_and_the_answer_stands(monkeypatch, tmp_path, capsys):
    """inspect --samples --host: the sample images only illustrate the answer; a failed copy must
    not fail the dataset check (and with it the window's Train)."""
    import contextlib

    from gui_app.core.ssh import HostError
    from gui_app.engine.commands import on_host

    class Session:
        detached_here = False

        def __init__(self, *args):
            pass

        def run(self):
            return 0

    def bring_back(host, folder, local_folder):
        raise HostError(f"{host.name}: cannot copy {folder} back: tar: not found")

    @contextlib.contextmanager
    def folders(host, count):
        yield [f"/tmp/x/{i}" for i in range(count)]

    monkeypatch.setattr(on_host, "check_app", lambda host: "0.1.0")
    monkeypatch.setattr(on_host, "remote_folders", folders)
    monkeypatch.setattr(on_host, "_Session", Session)
    monkeypatch.setattr(on_host, "_bring_back", bring_back)
    config = tmp_path / "c.json"
    config.write_text("{}")
    parser = build_parser()
    args = parser.parse_args(["inspect", str(config), "--json", "--samples", str(tmp_path / "s.npz"), "--host", "g"])
    assert args.on_host(args) == 0
    assert capsys.readouterr().err == "replica-studio inspect: warning: g: cannot copy /tmp/x/0 back: tar: not found\n"
    args = parser.parse_args(["export", "/runs/x", "--format", "keras", "-o", str(tmp_path / "m.keras"), "--host", "g"])
    assert args.on_host(args) == 2  # what the user asked for is no preview: its failure is the command's
    assert "cannot copy /tmp/x/0 back" in capsys.readouterr().err
