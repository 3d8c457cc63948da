"""``attach``, ``stop`` and ``runs``: a run seen and controlled from any process of its owner,
wherever and however it was started (docs/detached.md).

    replica-studio attach RUN_DIR [--from N]    # its events so far, then live; stdin: control words
    replica-studio stop RUN_DIR [--timeout S]   # stop with a checkpoint; returns when it has finished
    replica-studio runs [--json] [--runs-dir DIR]

Everything comes from the run directory: the events from ``events.jsonl``, whether a process
runs it from its lock (gui_app/core/run_lock.py), who and where from ``process.json``
(gui_app/core/live_runs.py), and words go through its control channel
(engine/control_channel.py). A run submitted to Slurm runs while its job does (Slurm's word,
gui_app/core/backends/slurm_jobs.py: ``runs`` lists it by its job), and ``stop`` cancels its job
(engine/cluster/slurm_runs.py). A run applied to Kubernetes is followed from its local record,
its chief's output copied into it as attach goes, ``runs`` lists it by its Job, and ``stop``
deletes its Job (engine/cluster/kubernetes_runs.py). No TensorFlow is loaded: ``attach`` starts
in a Python start's time.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

from gui_app.core import run_lock, rundir
from gui_app.core.backends import HereBackend, local_backend
from gui_app.core.events_follow import EventsFollower
from gui_app.core.live_runs import list_live_runs, live_process
from gui_app.engine.cluster import kubernetes_runs, scheduled_runs
from gui_app.engine.control_channel import ChannelError, NotRunning, send
from gui_app.engine.exits import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK

COMMANDS = ("attach", "stop", "runs")

# attach reads the file every 20 ms while nothing new is there: a line reaches its stdout at most
# ~20 ms after the run wrote it (docs/detached.md has the measured latency), for a stat and a
# read of nothing 50 times a second while idle.
POLL_SECONDS = 0.02
LIVE_CHECK_SECONDS = 0.25  # how often an idle attach asks whether the run's process is still there
STOP_TIMEOUT_SECONDS = 300.0  # a stop takes a step group and a checkpoint: seconds, a big model's minutes


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("attach", help="a run's events so far, then live until it finishes; control words "
                                             "from stdin (its end detaches: the run goes on)")
    p.add_argument("run_dir")
    p.add_argument("--from", dest="from_line", type=int, default=0, metavar="N",
                   help="start at event N (0-based: the lines of RUN_DIR/events.jsonl)")
    p.add_argument("--control", choices=("stdin", "none"), default="stdin",
                   help="stdin: send each line of stdin (stop, pause, continue, checkpoint) to the run and detach "
                        "when stdin ends (default); none: ignore stdin")
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


def _say(command: str, text: str) -> None:
    with contextlib.suppress(OSError, ValueError):  # stderr may be gone with the connection
        print(f"replica-studio {command}: {text}", file=sys.stderr, flush=True)


def _run_dir(args: argparse.Namespace) -> Path | None:
    run_dir = Path(args.run_dir).expanduser()
    if rundir.is_run_dir(run_dir):
        return run_dir
    _say(args.command, f"run_dir: {run_dir} is not a run directory (no {rundir.CONFIG_FILE})")
    return None


# ---- attach -------------------------------------------------------------------------------
def attach(args: argparse.Namespace) -> int:
    run_dir = _run_dir(args)
    if run_dir is None:
        return EXIT_BAD_INPUT
    if args.from_line < 0:
        _say("attach", f"--from: must be >= 0; got {args.from_line}")
        return EXIT_BAD_INPUT
    detached = threading.Event()  # set when this attachment ends and the run goes on
    if args.control == "stdin":
        threading.Thread(target=_forward_stdin, args=(run_dir, detached), name="attach-stdin", daemon=True).start()
    backend = local_backend(run_dir)
    mirror = scheduled_runs.mirror(backend)
    if mirror is not None:
        mirror.start()
    with _detaching_on_signals(detached):
        follower = backend.follow(args.from_line)
        try:
            return _follow(backend, follower, detached, mirror)
        finally:
            follower.close()
            if mirror is not None:
                mirror.close()


def _follow(backend: HereBackend, follower: EventsFollower, detached: threading.Event,
            mirror: kubernetes_runs.Mirror | None = None) -> int:
    """Copy the run's event lines to stdout until it has finished, its process is gone (a
    Kubernetes run: its ``mirror`` has copied the chief's output to its end), or this attachment
    ends (stdin closed, stdout gone, a signal)."""
    out = sys.stdout.buffer
    next_check = 0.0
    run_dir, job = backend.run_dir, backend.job_watch()
    while not detached.is_set():
        lines = follower.read()
        if lines:
            if not _write(out, lines):
                return EXIT_OK  # nobody reads us any more: detach
            continue
        now = time.monotonic()
        if now >= next_check:
            running = mirror.is_alive() if mirror is not None else run_lock.holder(run_dir) is not None
            if not running and not job.active():
                lines = follower.read()  # what it wrote before it let go of the run
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
        _say("attach", kubectl_said or f"{run_dir}: {job[1].scheduler} job {job[0]} is {job[1].describe()} and "
                                       f"the run did not finish{never}")
    elif not follower.events_read:
        _say("attach", f"{run_dir} has no events and no process runs it (it never started)")
    else:
        _say("attach", f"{run_dir}: its process is gone without finishing the run (killed, crashed, or its machine "
                       f"went down): the run is interrupted; resume it with: replica-studio resume {run_dir}")
    return EXIT_FAILED


def _write(out, lines: list[bytes]) -> bool:
    try:
        out.write(b"".join(lines))
        out.flush()
        return True
    except (OSError, ValueError):  # a closed pipe or a dropped connection
        with contextlib.suppress(OSError):
            # Python flushes stdout again at exit and would report the broken pipe: point it at /dev/null.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 1)
            os.close(devnull)
        return False


def _forward_stdin(run_dir: Path, detached: threading.Event) -> None:
    """Send each line of stdin to the run; the end of stdin detaches. A line cut off by the end
    of input (a dropped connection) is never sent: only a whole line can stop a run. Reads the
    descriptor itself: a thread blocked in ``sys.stdin``'s buffered reader makes the interpreter
    abort at exit (it cannot take the reader's lock)."""
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
                        _say("attach", f"'stop' not sent: {failed}")
                elif word:
                    try:
                        send(run_dir, word)
                    except ChannelError as exc:
                        _say("attach", f"{word!r} not sent: {exc}")
    except OSError:
        pass
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
        _say("stop", str(exc))
        return EXIT_BAD_INPUT
    deadline = time.monotonic() + args.timeout
    while run_lock.holder(run_dir) is not None:
        if time.monotonic() >= deadline:
            _say("stop", f"{run_dir} is still running {args.timeout:g} s after 'stop' was sent (process "
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
    found = list_live_runs(runs_dir)
    if args.json:
        print(json.dumps([run.to_json() for run in found]), flush=True)
        return EXIT_OK
    if not found:
        print(f"no runs in {runs_dir}", flush=True)
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
