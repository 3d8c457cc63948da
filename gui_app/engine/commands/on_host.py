"""``--host HOST``: an engine command run on an SSH host, its output streamed back unchanged.

    replica-studio train config.json --host gpu1 --events jsonl

The app there must answer ``--version`` with a compatible release first (which also opens the
shared connection); then the command runs there as ``HOST_COMMAND COMMAND ARG...``
(gui_app/core/ssh.py builds it, rebuilt here from the parsed arguments, every one quoted).

- Paths in arguments and inside the run configuration (datasets, RUN_DIR, ``--runs-dir``) are
  paths on the host; run directories stay there, and events name them by their path there.
- The run configuration of ``train`` and ``inspect`` is a local file: it travels on stdin.
- What a command writes for the user (``export --output``, ``inspect --samples``) is written to
  a temporary folder there and copied back (a tar stream over the connection, gui_app/core/ssh_files.py)
  to where the user asked; a preview that cannot come back is a warning, not a failure; the paths the
  command prints (``export_result``) are rewritten to name them here.
- stdout and stderr are the command's own (events as JSON lines, the log), and so is its exit
  code; a host that cannot run it is one line on stderr and exit 2 (for a run, after an ``error``
  and a ``run_finished`` event, as the engine ends a run it refuses).
- A run (``train``, ``resume``, ``evaluate``) always reads control lines there: Ctrl+C or SIGTERM
  here sends ``stop`` (it checkpoints and ends; a second one drops the connection),
  ``--control stdin`` forwards this stdin, and a dropped connection ends its input, which
  stops it as a window that went away does (docs/architecture.md, "Stop is cooperative").
- A detached run (``train --detach``, ``resume --detach``) is not tied to the connection: the
  command there prints its run directory and ends, and ``attach --host`` follows it, this stdin
  forwarded as its control lines; a dropped connection ends that attachment only
  (docs/detached.md).

A command gets ``--host`` from its row in :data:`REMOTE_COMMANDS`.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import IO, Iterator

from gui_app.core.config import ConfigError
from gui_app.core.events import Error, RunFinished
from gui_app.core.formats import ExportError
from gui_app.core.ssh import (
    SSH_FAILED,
    STDIN_FILE,
    HostError,
    StdinFile,
    check_app,
    close_connection,
    config_line,
    remote_argv,
)
from gui_app.core.ssh_files import fetch, remote_folders
from gui_app.core.ssh_hosts import Host, HostsFileError, find_host
from gui_app.engine.commands.attach import stdin_ends_attachment
from gui_app.engine.commands.reporting import empty_option
from gui_app.engine.run.exits import EXIT_BAD_INPUT, EXIT_INTERRUPTED, EXIT_OK


@dataclass(frozen=True)
class Remote:
    """Which arguments of a command name files here; everything else is the host's."""

    config: str | None = None  # a local run configuration: sent on stdin
    outputs: tuple[str, ...] = ()  # local paths the command writes: copied back
    previews: tuple[str, ...] = ()  # those of them that only illustrate: a failed copy is a warning
    run: bool = False  # a run: it reads control lines there, and Ctrl+C here sends "stop"
    stdin_flag: str | None = None  # the flag with which it reads our stdin (predict --serve)
    runs_dir: bool = False  # the host's runs folder, when set, is its --runs-dir
    control: bool = False  # it sends our stdin's lines to a run there (attach, unless --control none)


REMOTE_COMMANDS: dict[str, Remote] = {
    "train": Remote(config="config", run=True, runs_dir=True),
    "resume": Remote(run=True),
    "evaluate": Remote(run=True),
    "inspect": Remote(config="config", outputs=("samples",), previews=("samples",)),
    "devices": Remote(),
    "export": Remote(outputs=("output",)),
    "predict": Remote(stdin_flag="serve"),
    "attach": Remote(control=True),
    "log": Remote(stdin_flag="follow"),  # --follow ends with this stdin, as it does there
    "stop": Remote(),
    "runs": Remote(runs_dir=True),
    "diagnose": Remote(),
    "submit": Remote(config="config", runs_dir=True),  # sbatch on a Slurm login node
    "preflight": Remote(config="config", runs_dir=True),  # from a login node, a pod, an allocation
}


def add_host_option(subparsers: argparse._SubParsersAction) -> None:
    for name, remote in REMOTE_COMMANDS.items():
        parser = subparsers.choices[name]
        parser.add_argument("--host", metavar="HOST",
                            help="run it on this SSH host (user@host, a ~/.ssh/config alias, or one of "
                                 "'replica-studio hosts'); paths are paths there, output streams back")
        parser.add_argument("--reconnect", action="store_true",
                            help="with --host: end the shared connections to the host first and connect anew "
                                 "(a server whose configuration changed)")
        parser.set_defaults(on_host=functools.partial(run_on_host, remote, parser))


def run_on_host(remote: Remote, parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    if getattr(args, "detach", False):  # the run there is on its own: this is a command that prints a line
        remote = dataclasses.replace(remote, run=False)
    try:
        return _run_on_host(remote, parser, args)
    except (HostError, HostsFileError, ConfigError, ExportError, OSError) as exc:
        if remote.run:  # a run's output ends as the engine's own refused run does
            _run_failed(args.events, str(exc), "config" if isinstance(exc, ConfigError) else "input")
        print(f"replica-studio {args.command}: {exc}", file=sys.stderr, flush=True)
        return EXIT_BAD_INPUT


def _run_failed(mode: str, message: str, kind: str) -> None:
    from gui_app.engine.run.event_writer import EventWriter

    events = EventWriter(mode)
    events.emit_final(Error(message=message, kind=kind), durable=False)
    events.emit_final(RunFinished(status="failed", run_dir=None, step=0, message=message), durable=False)


def _host(name: str) -> Host:
    """The host ``--host`` names, refused as ``hosts add`` refuses it (a space, a leading '-'
    that ssh would read as an option) before anything reaches ssh."""
    try:
        return find_host(name)
    except HostsFileError:
        raise
    except ValueError as exc:  # the Host's own validation: the one refusal, worded once
        raise HostError(str(exc)) from None


def _run_on_host(remote: Remote, parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    host = _host(args.host)
    if empty := empty_option(args):  # refused here: the connection is not worth making for it
        raise ConfigError(empty)
    config = config_line(getattr(args, remote.config)) if remote.config else None  # a typo costs no connection
    outputs = {dest: Path(value).expanduser().absolute() for dest in remote.outputs if (value := getattr(args, dest))}
    for local in outputs.values():
        local.parent.mkdir(parents=True, exist_ok=True)
    if args.reconnect:
        close_connection(host)
    check_app(host)
    with remote_folders(host, len(outputs)) as folders:
        there: dict[str, str | StdinFile] = {dest: f"{folder}/{local.name}"
                                            for (dest, local), folder in zip(outputs.items(), folders)}
        if remote.config:
            there[remote.config] = STDIN_FILE
        app_args = [args.command, *command_arguments(parser, _as_run_there(remote, host, args), there)]
        brought = {folder: local.parent for folder, local in zip(folders, outputs.values())}
        previews = {folder for folder, dest in zip(folders, outputs) if dest in remote.previews}
        session = _Session(host, remote, args, brought, app_args, config)
        code = session.run()
        if session.detached_here:  # Ctrl+C or SIGTERM ended an attachment here: the run there goes on
            return EXIT_OK
        if code == SSH_FAILED:
            how = ("; the run there stops with a checkpoint: resume it with --host" if remote.run else
                   "; the run there goes on: attach to it again with --host" if remote.control else "")
            raise HostError(f"{host.name}: the connection ended (ssh exit 255){how}")
        if code < 0:  # ssh ended by a second Ctrl+C
            return EXIT_INTERRUPTED
        for folder, local_folder in brought.items():  # what it wrote, even when it failed (--keep-failed)
            try:
                _bring_back(host, folder, local_folder)
            except HostError as exc:
                if folder not in previews:
                    raise
                # A preview (inspect's sample images) only illustrates the answer: the answer stands.
                print(f"replica-studio {args.command}: warning: {exc}", file=sys.stderr, flush=True)
    return code


def _as_run_there(remote: Remote, host: Host, args: argparse.Namespace) -> argparse.Namespace:
    there = argparse.Namespace(**vars(args))
    if remote.run:
        there.control = "stdin"
    if remote.runs_dir and not args.runs_dir and host.runs_dir:
        there.runs_dir = host.runs_dir
    return there


def command_arguments(parser: argparse.ArgumentParser, args: argparse.Namespace,
                      replace: dict[str, str | StdinFile]) -> list[str | StdinFile]:
    """The arguments of ``args`` again, for the same command there (``replace`` gives other
    values by dest): options by their long name (``--name=value`` when the value starts with
    '-', so it cannot read as an option), then ``--`` and the positionals. Each value stays a
    word of its own otherwise, so a leading ``~/`` can be the home there. Built from the
    parser's actions (argparse has no public list of them): every option of the command is
    carried, abbreviated or not as the user typed it."""
    options: list[str | StdinFile] = []
    positionals: list[str | StdinFile] = []
    for action in parser._actions:
        if action.default == argparse.SUPPRESS or action.dest in ("host", "reconnect"):  # ours, not the host's
            continue
        value = replace.get(action.dest, getattr(args, action.dest))
        if not action.option_strings:
            positionals += value if isinstance(value, list) else [value]
        elif value is not None and value != action.default:
            flag = max(action.option_strings, key=len)
            if action.nargs == 0:
                options.append(flag)
            else:
                for item in value if isinstance(value, list) else [value]:
                    if isinstance(item, str) and item.startswith("-"):
                        options.append(f"{flag}={item}")
                    else:
                        options += [flag, item if item is STDIN_FILE else str(item)]
    return [*options, "--", *positionals] if positionals else options


class _Session:
    """One ssh process running the command (started here): its stdin fed, its stdout passed on,
    signals relayed; :meth:`run` returns ssh's exit code (the command's, or 255)."""

    def __init__(self, host: Host, remote: Remote, args: argparse.Namespace, rewrite: dict[str, Path],
                 app_args: list[str | StdinFile], config: bytes | None):
        self.remote, self.rewrite, self.config = remote, rewrite, config
        self.forward_stdin = (((remote.run or remote.control) and args.control == "stdin")
                              or bool(remote.stdin_flag and getattr(args, remote.stdin_flag)))
        # attach there detaches when its stdin ends; an empty or closed stdin here (a script's, cron's)
        # must not end it at once, as it does not here: its lines are sent, and the pipe is held open.
        ends = stdin_ends_attachment() if remote.control and self.forward_stdin else True
        self.hold_stdin = ends is not True
        self.forward_stdin = self.forward_stdin and ends is not None
        self.piped = config is not None or remote.run or self.hold_stdin
        self._lock = threading.Lock()
        self._stop_sent = False
        self.detached_here = False
        stdin = subprocess.PIPE if self.piped else None if self.forward_stdin else subprocess.DEVNULL
        # A session of its own: the terminal's Ctrl+C comes to us, and we decide what the host gets.
        self.proc = subprocess.Popen(remote_argv(host, app_args), stdin=stdin, start_new_session=True,
                                     stdout=subprocess.PIPE if rewrite else None)

    def run(self) -> int:
        try:
            copier = None
            if self.rewrite:
                copier = threading.Thread(target=self._copy_stdout, args=(self.proc.stdout,), name="remote-stdout",
                                          daemon=True)
                copier.start()
            if self.config is not None:
                self._send(self.config)
            if self.piped and self.forward_stdin:
                threading.Thread(target=self._forward_stdin, name="remote-stdin", daemon=True).start()
            elif self.piped and not self.remote.run and not self.hold_stdin:
                self._close_stdin()
            with self._relaying_signals():
                code = self.proc.wait()
        finally:
            if self.proc.poll() is None:  # we failed, not ssh: end the session, the command there sees its input end
                self.proc.terminate()
            if self.piped:
                self._close_stdin()
        if copier is not None:
            copier.join()
        return code

    # ---- stdin ----------------------------------------------------------------------------
    def _send(self, data: bytes) -> None:
        with self._lock, contextlib.suppress(OSError, ValueError):  # it ended, or stdin was closed
            if self.proc.stdin is not None:  # a piped session: the only kind sent anything
                self.proc.stdin.write(data)
                self.proc.stdin.flush()

    def _close_stdin(self) -> None:
        with self._lock, contextlib.suppress(OSError):
            if self.proc.stdin is not None:
                self.proc.stdin.close()

    def _forward_stdin(self) -> None:
        with contextlib.suppress(OSError, ValueError):  # an unreadable stdin (nohup's) has no lines
            for line in sys.stdin.buffer:
                self._send(line)
        if not self.hold_stdin:
            self._close_stdin()  # end of our input: a run stops, as when its window goes away

    # ---- signals --------------------------------------------------------------------------
    @contextlib.contextmanager
    def _relaying_signals(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = {sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        if self.remote.run and not self._stop_sent:
            # The main thread never holds the lock while it waits, so taking it here cannot deadlock.
            self._stop_sent = True
            self._send(b"stop\n")
        else:
            self.detached_here = self.remote.control
            self.proc.terminate()  # ssh closes the session; the command there sees its input end

    # ---- stdout ---------------------------------------------------------------------------
    def _copy_stdout(self, stdout: IO[bytes]) -> None:
        out = sys.stdout.buffer
        for line in stdout:
            for there, here in self.rewrite.items():
                text = json.dumps(str(here))[1:-1] if line.lstrip().startswith(b"{") else str(here)
                line = line.replace(f"{there}/".encode(), f"{text}/".encode())
            with contextlib.suppress(OSError):
                out.write(line)
                out.flush()


def _bring_back(host: Host, folder: str, local_folder: Path) -> None:
    """Copy what the command wrote into ``folder`` there into ``local_folder``, each entry
    replacing one of the same name atomically (a folder only when it is a SavedModel)."""
    from gui_app.engine.export.atomic import AtomicDestination

    staging = Path(tempfile.mkdtemp(prefix=".replica-studio-", dir=local_folder))  # the same file system
    try:
        fetch(host, folder, staging)
        for entry in sorted((staging / Path(folder).name).iterdir()):
            with AtomicDestination(local_folder / entry.name, entry.is_dir()) as out:
                os.replace(entry, out.temp)
                out.commit()
    finally:
        shutil.rmtree(staging, ignore_errors=True)
