"""The engine's command line: ``replica-studio COMMAND ...``, one module per command group.

Each command module here names its commands (``COMMANDS``) and registers their parsers with a
handler (``add_commands``). Exit codes: 0 completed or stopped, 1 failed in training, 2 bad
config or input. Errors are one line on stderr; ``--debug`` adds the traceback.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from gui_app import __version__
from gui_app.core.backends import local_backend
from gui_app.engine.commands import (
    attach,
    bundle,
    cluster_script,
    compare,
    devices,
    diagnose,
    export,
    export_run,
    hosts,
    inspect,
    log,
    on_host,
    predict,
    preflight,
    prepare,
    rehearse,
    report,
    scaling,
    submit,
    sweep,
    train,
    worker,
)
from gui_app.engine.commands.reporting import empty_option
from gui_app.engine.run.exits import EXIT_BAD_INPUT, RUN_COMMANDS
from gui_app.engine.schedulers import scheduled_runs

_MODULES = (train, attach, log, inspect, devices, scaling, export, predict, prepare, worker, cluster_script, submit,
            hosts, sweep, compare, diagnose, report, bundle, preflight, export_run, rehearse)
SUBCOMMANDS: tuple[str, ...] = tuple(name for module in _MODULES for name in module.COMMANDS)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="replica-studio", description=(
        "Distributed TensorFlow training and evaluation. Without a command, opens the desktop app."))
    parser.add_argument("--version", action="version", version=f"replica-studio {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in _MODULES:
        module.add_commands(sub)
    on_host.add_host_option(sub)  # --host on the commands that can run on an SSH host
    return parser


def _quiet_tensorflow(debug: bool) -> None:
    import os

    if debug:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
        return
    from gui_app.engine.run.quiet import silence_tensorflow_logs

    silence_tensorflow_logs()  # bad input must read as one line, not eight of TensorFlow's


def _hold_standard_descriptors() -> None:
    """Put /dev/null on a closed stdin, stdout or stderr (``cmd <&-``, some daemons and cron
    setups). Otherwise the next file opened takes its number: the stderr filter's copy of stderr
    became fd 0, and ``attach`` read its control words from it."""
    for fd, mode in ((0, os.O_RDONLY), (1, os.O_WRONLY), (2, os.O_WRONLY)):
        try:
            os.fstat(fd)
        except OSError:
            try:
                null = os.open(os.devnull, mode)
            except OSError:
                return
            if null != fd:
                os.dup2(null, fd)
                os.close(null)


def main(argv: list[str] | None = None) -> int:
    _hold_standard_descriptors()
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return EXIT_BAD_INPUT
    empty = empty_option(args)
    if empty and args.command not in (*RUN_COMMANDS, "hosts") and getattr(args, "host", None) is None:
        # (a run refuses it itself, its error in its events; --host before connecting; hosts add's Host too)
        print(f"replica-studio {args.command}: {empty}", file=sys.stderr, flush=True)
        return EXIT_BAD_INPUT
    if getattr(args, "host", None) is not None:  # before the log filter: the host's stderr passes unchanged
        # (an empty --host '' too: refused there, never quietly run here)
        return args.on_host(args)
    if args.command in ("resume", "evaluate") and Path(args.run_dir).expanduser().is_file():
        # A run bundle: checked and extracted into the folder the command writes (before --detach forks)
        refused = bundle.extract_for_command(args)
        if refused is not None:
            return refused
    if args.command == "resume" and (backend := local_backend(Path(args.run_dir).expanduser().absolute())).resubmits():
        return scheduled_runs.resume(args, backend)  # submitted to its scheduler again
    if getattr(args, "detach", False):  # before the log filter's thread, which a fork would not copy
        if args.command == "sweep":  # it forks itself once its folder exists (and loads no TensorFlow)
            return args.handler(args)
        from gui_app.engine.run.detach import start

        return start(args)
    _quiet_tensorflow(bool(getattr(args, "debug", False)))
    try:
        return args.handler(args)
    except BrokenPipeError:
        # The reader went away (`replica-studio runs | head`): nothing is left to say, and the
        # interpreter must not say it either when it flushes stdout at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
