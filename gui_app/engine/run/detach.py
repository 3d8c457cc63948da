"""``train --detach`` and ``resume --detach``: the run in a session of its own, this process
waiting only until it has started.

This process forks before anything heavy is loaded (TensorFlow, the stderr filter's thread: the
fork copies no thread). The child is the run: ``setsid`` (no controlling terminal, out of the
terminal's process group, so a closed terminal, a Ctrl+C there, a logout's SIGHUP to the
session and the death of the shell that started it do not reach it), SIGHUP ignored, stdin,
stdout and stderr on /dev/null until its run directory exists, then stdout and stderr appended
to ``RUN_DIR/engine.log`` (engine/run/presence.py). It writes its events to the run directory as every run does, and the
first of them also to a pipe to this process (:class:`ReadyPipe`), which prints the run
directory and exits 0 once ``run_started`` is in ``events.jsonl``, or prints the run's own error
line and exits with its code when the run ends before it starts. After that nothing ties the run
to this process: its death, at any moment, only closes the pipe, which the run ignores.
docs/detached.md says what survives what.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

from gui_app.core.rundir import LOG_FILE
from gui_app.engine.run.exits import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK
from gui_app.engine.run.process import fork_session


class ReadyPipe:
    """The detached run's event stream (JSON lines) until the run has started or ended: then the
    pipe is closed and every later write is dropped. A reader that went away is not an error."""

    def __init__(self, fd: int):
        self._fd = fd

    def write(self, text: str) -> int:
        if self._fd < 0:
            return len(text)
        try:
            os.write(self._fd, text.encode("utf-8"))
        except OSError:  # the process that started us is gone: nothing waits for the word
            self._close()
            return len(text)
        for line in text.splitlines():
            if json.loads(line).get("type") in ("run_started", "run_finished"):
                self._close()
                break
        return len(text)

    def flush(self) -> None:
        pass

    def _close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def start(args: argparse.Namespace) -> int:
    """Fork the run into a session of its own; return when it has started (or has failed)."""
    command = args.command
    if args.control == "stdin":
        return _refuse(command, "--detach: a detached run reads no stdin; send it control words with "
                                "'replica-studio attach RUN_DIR' (or stop it with 'replica-studio stop RUN_DIR')")
    if not hasattr(os, "fork") or not hasattr(os, "setsid"):
        return _refuse(command, "--detach needs a POSIX system (fork and setsid)")
    read_end, write_end = os.pipe()

    def the_run() -> int:
        os.close(read_end)
        # The command's own handler (train's run_command, from its parser): the run process is
        # below the command line, so it never imports a command.
        return args.handler(argparse.Namespace(**{**vars(args), "events": "jsonl"}), stream=ReadyPipe(write_end))

    pid = fork_session(the_run)
    os.close(write_end)
    return _wait_until_started(command, read_end, pid)


def _wait_until_started(command: str, read_end: int, pid: int) -> int:
    """Read the run's first events; print its run directory once it has started."""
    error = None
    try:
        with os.fdopen(read_end, "rb") as pipe:
            for line in pipe:
                try:
                    event = json.loads(line)
                except ValueError:  # half a line: the run died writing it
                    break
                if event.get("type") == "run_started":
                    print(event["run_dir"], flush=True)
                    return EXIT_OK
                if event.get("type") == "run_finished":
                    error = event.get("message") or f"the run ended ({event.get('status')}) before it started"
                    break
    except KeyboardInterrupt:
        print(f"replica-studio {command}: no longer waiting for it to start; the run goes on "
              "('replica-studio runs' lists it)", file=sys.stderr, flush=True)
        return EXIT_INTERRUPTED
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if error is None:
        error = f"the run's process ended before the run started (exit {code}); its run directory's {LOG_FILE} says why"
    print(f"replica-studio {command}: {error}", file=sys.stderr, flush=True)
    return code if code > 0 else EXIT_FAILED


def _refuse(command: str, message: str) -> int:
    print(f"replica-studio {command}: {message}", file=sys.stderr, flush=True)
    return EXIT_BAD_INPUT
