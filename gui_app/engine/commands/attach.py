"""``attach``, ``stop`` and ``runs``: a run seen and controlled from any process of its owner,
wherever and however it was started (docs/detached.md).

    replica-studio attach RUN_DIR [--from N] [--from-byte B] [--inode I | --history] [--text]   # its events, then live
    replica-studio stop RUN_DIR [--timeout S]   # stop with a checkpoint; returns when it has finished
    replica-studio runs [--json] [--runs-dir DIR]

Everything comes from the run directory: the events from ``events.jsonl``, whether a process
runs it from its lock (gui_app/core/run_lock.py), who and where from ``process.json``
(gui_app/core/live_runs.py), and words go through its control channel
(engine/run/control_fifo.py). A run submitted to Slurm runs while its job does (Slurm's word,
gui_app/core/backends/slurm.py: ``runs`` lists it by its job), and ``stop`` cancels its job
(engine/schedulers/slurm/runs.py). A run applied to Kubernetes is followed from its local record,
its chief's output copied into it as attach goes, ``runs`` lists it by its Job, and ``stop``
deletes its Job (engine/schedulers/kubernetes/runs.py). No TensorFlow is loaded: ``attach`` starts
in a Python start's time.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import stat
import sys
import threading
import time
from pathlib import Path
from typing import IO, Callable

from gui_app.core import run_lock, rundir
from gui_app.core.backends import HereBackend, local_backend
from gui_app.core.events import Error, decode_line
from gui_app.core.events_follow import EventsFollower
from gui_app.core.live_runs import list_live_runs, live_process
from gui_app.engine.commands.attach_history import history_start, line_start_problem, not_the_file
from gui_app.engine.run.control_fifo import ChannelError, NotRunning, send
from gui_app.engine.run.event_writer import format_text
from gui_app.engine.run.exits import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK, say
from gui_app.engine.schedulers import scheduled_runs
from gui_app.engine.schedulers.kubernetes import runs as kubernetes_runs

COMMANDS = ("attach", "stop", "runs")

# attach reads the file every 20 ms while nothing new is there: a line reaches its stdout at most
# ~20 ms after the run wrote it (docs/detached.md has the measured latency), for a stat and a
# read of nothing 50 times a second while idle.
POLL_SECONDS = 0.02
LIVE_CHECK_SECONDS = 0.25  # how often an idle attach asks whether the run's process is still there
READ_BYTES = 8 << 20  # the lines written on at a time: a replay of a file of GBs holds this much, not the file
# attach --inode: the events file is not the one --from and --from-byte were counted in (a resumed
# run replaced it): nothing was written, and the reader asks for the history again (docs/detached.md)
EXIT_REPLACED = 3
STOP_TIMEOUT_SECONDS = 300.0  # a stop takes a step group and a checkpoint: seconds, a big model's minutes


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("attach", help="a run's events so far, then live until it finishes; control words "
                                             "from stdin (its end detaches: the run goes on)")
    p.add_argument("run_dir")
    p.add_argument("--from", dest="from_line", type=int, default=0, metavar="N",
                   help="start at event N (0-based: the lines of RUN_DIR/events.jsonl, counted from --from-byte)")
    p.add_argument("--from-byte", dest="from_byte", type=int, default=0, metavar="B",
                   help="count --from's lines from byte B of RUN_DIR/events.jsonl (a line's start: the 'offset' "
                        "of --history's line)")
    p.add_argument("--inode", type=int, default=0, metavar="I",
                   help="the inode of RUN_DIR/events.jsonl that --from and --from-byte were counted in (the "
                        "'inode' of --history's line): when the file is another one (a resumed run replaced it), "
                        "exit 3 without writing a line")
    p.add_argument("--history", action="store_true",
                   help="a long run: first one 'history' line with the run's history from its pyramid (built "
                        "first for a run that has none), then its events from the byte where the pyramid ends "
                        "(the window's re-attachment: the bytes do not grow with the run's length); a short "
                        "run: every line, as without it")
    p.add_argument("--control", choices=("stdin", "none"), default="stdin",
                   help="stdin: send each line of stdin (stop, pause, continue, checkpoint) to the run (default); "
                        "the end of a terminal's or a pipe's input detaches, an empty or closed stdin (/dev/null, "
                        "nohup) does not; none: ignore stdin (cron jobs, whose stdin is a closed pipe)")
    p.add_argument("--text", action="store_true",
                   help="print readable lines, as 'train' does in a terminal, instead of JSON lines")
    p.set_defaults(handler=attach)
    p = subparsers.add_parser("stop", help="stop a run with a checkpoint and wait until it has finished")
    p.add_argument("run_dir")
    p.add_argument("--timeout", type=float, default=STOP_TIMEOUT_SECONDS, metavar="SECONDS",
                   help=f"give up waiting after this long (default {STOP_TIMEOUT_SECONDS:g})")
    p.set_defaults(handler=stop)
    p = subparsers.add_parser("runs", help="the runs and their status; the process, host and step of running ones")
    p.add_argument("--json", action="store_true", help="print a JSON list, newest first")
    p.add_argument("--runs-dir", help="the runs folder (default: the user data folder)")
    p.set_defaults(handler=runs)


def _run_dir(args: argparse.Namespace) -> Path | None:
    run_dir = Path(args.run_dir).expanduser()
    if rundir.is_run_dir(run_dir):
        return run_dir
    say(args.command, f"run_dir: {run_dir} is not a run directory (no {rundir.CONFIG_FILE})")
    return None


# ---- attach -------------------------------------------------------------------------------
def attach(args: argparse.Namespace) -> int:
    run_dir = _run_dir(args)
    if run_dir is None:
        return EXIT_BAD_INPUT
    if args.from_line < 0:
        say("attach", f"--from: must be >= 0; got {args.from_line}")
        return EXIT_BAD_INPUT
    if args.history and (args.from_line or args.from_byte or args.inode or args.text):
        say("attach", "--history: the history comes before line 0; not with --from, --from-byte, --inode or --text")
        return EXIT_BAD_INPUT
    events = run_dir / rundir.EVENTS_FILE
    if args.inode and (problem := not_the_file(events, args.inode)):
        say("attach", f"--inode: {problem}")
        return EXIT_REPLACED
    if args.from_byte and (problem := line_start_problem(events, args.from_byte)):
        say("attach", f"--from-byte: {problem}")
        return EXIT_BAD_INPUT
    detached = threading.Event()  # set when this attachment ends and the run goes on
    if args.control == "stdin" and (ends_attachment := stdin_ends_attachment()) is not None:
        threading.Thread(target=_forward_stdin, args=(run_dir, detached, ends_attachment), name="attach-stdin",
                         daemon=True).start()
    backend = local_backend(run_dir)
    mirror = scheduled_runs.mirror(backend)
    if mirror is not None:
        mirror.start()
    with _detaching_on_signals(detached):
        start = history_start(run_dir) if args.history else None
        follower = (backend.follow(0, start.offset) if start is not None
                    else backend.follow(args.from_line, args.from_byte))
        try:
            # the file read is the one checked above, unless a resume replaced it in between
            if args.inode and (fd := follower.open()) is not None and (problem := not_the_file(fd, args.inode)):
                say("attach", f"--inode: {problem}")
                return EXIT_REPLACED
            if start is not None and not _write(_Output(sys.stdout.buffer, None), [start.line]):
                return EXIT_OK  # nobody reads us any more: detach
            return _follow(backend, follower, detached, mirror, _as_text if args.text else None)
        finally:
            follower.close()
            if mirror is not None:
                mirror.close()


def _follow(backend: HereBackend, follower: EventsFollower, detached: threading.Event,
            mirror: kubernetes_runs.Mirror | None = None,
            shown: Callable[[list[bytes]], list[bytes]] | None = None) -> int:
    """Copy the run's event lines to stdout (``shown``: as it turns them) until it has finished,
    its process is gone (a Kubernetes run: its ``mirror`` has copied the chief's output to its
    end), or this attachment ends (stdin closed, stdout gone, a signal)."""
    out = _Output(sys.stdout.buffer, shown)
    next_check = 0.0
    run_dir, job = backend.run_dir, backend.job_watch()
    while not detached.is_set():
        lines = follower.read(READ_BYTES)
        if lines:
            if not _write(out, lines):
                return EXIT_OK  # nobody reads us any more: detach
            continue
        now = time.monotonic()
        if now >= next_check:
            running = mirror.is_alive() if mirror is not None else run_lock.holder(run_dir) is not None
            if not running and not job.active():
                lines = follower.read(READ_BYTES)  # what it wrote before it let go of the run
                if lines:
                    if not _write(out, lines):
                        return EXIT_OK
                    continue
                return _ended(backend, follower, mirror.error if mirror is not None else "")
            next_check = now + LIVE_CHECK_SECONDS
        detached.wait(POLL_SECONDS)
    return EXIT_OK


def _ended(backend: HereBackend, follower: EventsFollower, kubectl_said: str = "") -> int:
    """No process runs it and every line is out: 0 when the run finished, else 1 and one line."""
    if follower.finished:
        return EXIT_OK
    run_dir, job = backend.run_dir, backend.job()
    if job is not None:
        never = "" if follower.events_read else " (it never started)"
        say("attach", kubectl_said or f"{run_dir}: {job[1].scheduler} job {job[0]} is {job[1].describe()} and "
                                       f"the run did not finish{never}")
    elif not follower.events_read:
        say("attach", f"{run_dir} has no events and no process runs it (it never started)")
    else:
        say("attach", f"{run_dir}: its process is gone without finishing the run (killed, crashed, or its machine "
                       f"went down): the run is interrupted; resume it with: replica-studio resume {run_dir}")
    return EXIT_FAILED


class _Output:
    """stdout as attach writes it: the event lines as they are, or as ``shown`` turns them."""

    def __init__(self, stream: IO[bytes], shown: Callable[[list[bytes]], list[bytes]] | None):
        self.stream, self.shown = stream, shown

    def write(self, lines: list[bytes]) -> None:
        self.stream.write(b"".join(self.shown(lines) if self.shown else lines))

    def flush(self) -> None:
        self.stream.flush()


def _as_text(lines: list[bytes]) -> list[bytes]:
    """The readable lines ``train`` prints for these events (its ``--events text``), and each
    error's message, which a run says on its own stderr and attach would otherwise leave out."""
    out = []
    for line in lines:
        event = decode_line(line, parts=True)
        text = f"error: {event.message}" if isinstance(event, Error) else format_text(event) if event else None
        if text:
            out.append(text.encode("utf-8", "replace") + b"\n")
    return out


def _write(out: _Output, lines: list[bytes]) -> bool:
    try:
        out.write(lines)
        out.flush()
        return True
    except (OSError, ValueError):  # a closed pipe or a dropped connection
        with contextlib.suppress(OSError):
            # Python flushes stdout again at exit and would report the broken pipe: point it at /dev/null.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 1)
            os.close(devnull)
        return False


def stdin_ends_attachment() -> bool | None:
    """Whether the end of stdin detaches; None when stdin is not read at all.

    A terminal's end is the user's Ctrl+D, and a pipe's or a socket's is its writer going away
    (the window, an ssh session): both detach. Anything else -- /dev/null, a file, a stdin that
    is closed or unreadable (a systemd service, nohup, ``< /dev/null`` in a script) -- has
    nobody behind it who could leave: its lines are sent, and the attachment follows the run to
    its end. (cron's stdin is a pipe it closes at once: indistinguishable from a window that went
    away, so cron jobs say ``--control none``.) A terminal whose foreground is another job
    (``attach ... &``) is not read: reading it would stop this process (SIGTTIN)."""
    try:
        mode = os.fstat(0).st_mode
    except OSError:  # no stdin at all
        return None
    if os.isatty(0):
        with contextlib.suppress(OSError):
            if os.tcgetpgrp(0) != os.getpgrp():
                return None
        return True
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


def _forward_stdin(run_dir: Path, detached: threading.Event, ends_attachment: bool = True) -> None:
    """Send each line of stdin to the run; the end of stdin detaches when ``ends_attachment``.
    A line cut off by the end of input (a dropped connection) is never sent: only a whole line
    can stop a run. Reads the descriptor itself: a thread blocked in ``sys.stdin``'s buffered
    reader makes the interpreter abort at exit (it cannot take the reader's lock)."""
    pending = b""
    try:
        while data := os.read(0, 4096):
            *lines, pending = (pending + data).split(b"\n")
            for line in lines:
                word = line.decode("utf-8", "replace").strip()
                backend = local_backend(run_dir) if word == "stop" else None
                if backend is not None and backend.by_scheduler():  # scancel, kubectl delete: its workers
                    failed = backend.cancel()  # get SIGTERM and stop together with a checkpoint
                    if failed:
                        say("attach", f"'stop' not sent: {failed}")
                elif word:
                    try:
                        send(run_dir, word)
                    except ChannelError as exc:
                        say("attach", f"{word!r} not sent: {exc}")
    except OSError:  # unreadable (nohup's stdin) or gone with its connection
        pass
    if ends_attachment:
        detached.set()


@contextlib.contextmanager
def _detaching_on_signals(detached: threading.Event):
    """Ctrl+C, SIGTERM and SIGHUP end the attachment, not the run."""
    signals = (signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGHUP", None))
    previous = {}
    for sig in filter(None, signals):
        with contextlib.suppress(ValueError, OSError):  # not the main thread (a test): no handlers
            previous[sig] = signal.signal(sig, lambda signum, frame: detached.set())
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


# ---- stop ---------------------------------------------------------------------------------
def stop(args: argparse.Namespace) -> int:
    if not args.timeout >= 0:  # NaN too, which never passes a deadline ('inf' is "wait as long as it takes")
        say("stop", f"--timeout: must be a number of seconds >= 0; got {args.timeout:g}")
        return EXIT_BAD_INPUT
    run_dir = _run_dir(args)
    if run_dir is None:
        return EXIT_BAD_INPUT
    process = live_process(run_dir)
    if (backend := local_backend(run_dir)).by_scheduler():
        return scheduled_runs.stop(backend, args.timeout)
    if process is None:
        info = rundir.read_run(run_dir)
        print(f"{run_dir}: not running ({info.status} at step {info.step})", flush=True)
        return EXIT_OK
    try:
        send(run_dir, "stop")
    except NotRunning:
        pass  # it ended meanwhile
    except ChannelError as exc:
        say("stop", str(exc))
        return EXIT_BAD_INPUT
    deadline = time.monotonic() + args.timeout
    while run_lock.holder(run_dir) is not None:
        if time.monotonic() >= deadline:
            say("stop", f"{run_dir} is still running {args.timeout:g} s after 'stop' was sent (process "
                         f"{process.pid} on {process.host}); it stops after its step group and a checkpoint: "
                         f"wait for it with 'replica-studio attach {run_dir}', or end it with 'kill {process.pid}' "
                         "there (resume goes on from its last checkpoint)")
            return EXIT_FAILED
        time.sleep(0.05)
    info = rundir.read_run(run_dir)
    print(f"{run_dir}: {info.status} at step {info.step}", flush=True)
    return EXIT_OK


# ---- runs ---------------------------------------------------------------------------------
def runs(args: argparse.Namespace) -> int:
    runs_dir = Path(args.runs_dir).expanduser() if args.runs_dir else rundir.default_runs_dir()
    problem = _not_a_runs_folder(runs_dir)
    if problem:
        say("runs", f"{'--runs-dir' if args.runs_dir else 'runs folder'}: {problem}")
        return EXIT_BAD_INPUT
    found = list_live_runs(runs_dir)
    if args.json:
        print(json.dumps([run.to_json() for run in found]), flush=True)
        return EXIT_OK
    if not found:
        # A folder not made yet is a new user's (or a host's before its first run): no runs, not an error.
        print(f"no runs in {runs_dir}{'' if runs_dir.exists() else ' (no such folder yet)'}", flush=True)
        return EXIT_OK
    rows = [("STATUS", "STEP", "PROCESS", "RUN")]
    for run in found:
        info, process = run.info, run.process
        step = f"{info.step}/{info.total_steps}" if info.total_steps else str(info.step)
        job = f"{run.job[1].scheduler} job {run.job[0]}" if run.job else "-"
        where = f"{process.pid} on {process.host}" if process else job
        rows.append((run.status, step, where, str(info.path)))
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths)) + "  " + row[3])
    return EXIT_OK


def _not_a_runs_folder(path: Path) -> str | None:
    """Why ``path`` cannot be listed as a runs folder (a file, a run directory, unreadable);
    None when it can, or when it does not exist yet. Listing it anyway printed "no runs" and
    exit 0, which reads as "your runs are gone"."""
    if rundir.is_run_dir(path) and not rundir.run_dirs(path):  # (a folder with a config.json beside its runs is fine)
        return f"{path} is a run directory, not a folder of runs (its runs folder: {path.parent})"
    try:
        with os.scandir(path):
            return None
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        return f"{path} is a file, not a folder of runs"
    except OSError as exc:
        return f"cannot read {path}: {exc.strerror or exc}"
