"""``replica-studio sweep``: hyperparameter sweeps of ordinary runs on Optuna (docs/sweeps.md).

    replica-studio sweep SWEEP.json [--parallel N] [--sweeps-dir DIR] [--storage URL] [--detach]
    replica-studio sweep status SWEEP_DIR [--json [--every S]]
    replica-studio sweep resume SWEEP_DIR [--parallel N] [--detach]
    replica-studio sweep stop SWEEP_DIR

A new sweep prints its folder (one line), then a line per trial event. With ``--detach`` (a new
sweep or resume) it prints the folder, runs in a session of its own with its lines in
``SWEEP_DIR/sweep.log``, and this process exits once the sweep holds its folder (the window
starts sweeps so). Exit codes: 0 the sweep completed or
stopped (detached: it started), 2 a bad sweep file or folder (one line on stderr naming the key).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import sys
import time
import traceback
from pathlib import Path
from typing import Callable

from gui_app.core.config_json import ConfigError
from gui_app.core.sweep_config import MAX_PARALLEL, SWEEP_LOG, SweepConfig
from gui_app.engine.run.exits import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK

COMMANDS = ("sweep",)
ACTIONS = ("status", "resume", "stop")
STOP_WAIT_S = 600.0  # a trial stops at its next step group (seconds) and writes a checkpoint


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "sweep", help="a hyperparameter sweep of runs (Optuna): sweep SWEEP.json | status|resume|stop SWEEP_DIR",
        description="Run a sweep file's trials as ordinary runs, or act on a sweep's folder (docs/sweeps.md).",
        usage="replica-studio sweep SWEEP.json [--parallel N] [--sweeps-dir DIR] [--storage URL] [--detach]\n"
              "       replica-studio sweep {status [--json [--every S]],resume [--parallel N] [--detach],stop} "
              "SWEEP_DIR")
    p.add_argument("words", nargs="+", metavar="ARG", help="a sweep file, or status|resume|stop and a sweep folder")
    p.add_argument("--parallel", type=int, metavar="N", help="trials at once (default: the sweep file's parallel)")
    p.add_argument("--sweeps-dir", metavar="DIR", help="folder for sweep folders (default: the user data folder)")
    p.add_argument("--storage", metavar="URL", help="Optuna storage, e.g. postgresql://user@host/db or "
                                                    "journal:/shared/study.journal (default: sqlite in the sweep "
                                                    "folder; a Slurm sweep: a journal file there)")
    p.add_argument("--json", action="store_true", help="status: print one JSON object")
    p.add_argument("--every", type=float, metavar="S", help="status --json: a line every S seconds while the "
                   "sweep or a trial runs (the window follows a sweep so: Optuna is imported once)")
    p.add_argument("--detach", action="store_true", help="a new sweep or resume: run in a session of its own "
                   f"(its lines in SWEEP_DIR/{SWEEP_LOG}); exit once it has started")
    p.add_argument("--debug", action="store_true", help="print tracebacks")
    p.set_defaults(handler=_sweep)


def _say(text: str) -> None:
    try:
        print(text, flush=True)
    except (OSError, ValueError):  # whoever read stdout went away: the sweep goes on
        pass


def _sweep(args: argparse.Namespace) -> int:
    words = args.words
    action = action_of(args)
    name = f"sweep {action}" if action else "sweep"
    try:
        if action is None:
            _check_sweep_file(words)
        if args.every is not None and (action != "status" or not args.json or not 0.1 <= args.every <= 3600):
            raise ConfigError(f"--every: only with status --json, 0.1 to 3600 seconds; got {args.every}")
        if args.detach and action not in (None, "resume"):
            raise ConfigError(f"--detach: only a new sweep or resume runs detached; got sweep {action}")
        if args.parallel is not None and not 1 <= args.parallel <= MAX_PARALLEL:
            raise ConfigError(f"--parallel: must be in [1, {MAX_PARALLEL}]; got {args.parallel}")
        if action is None:
            return _start(args, Path(words[0]))
        from gui_app.engine.sweep.folder import SweepFolder

        folder = SweepFolder.open(words[1])
        return {"status": _status, "resume": _resume, "stop": _stop}[action](args, folder)
    except ConfigError as exc:
        _fail(args, name, str(exc))
        return exc.code if isinstance(exc, _Ended) else EXIT_BAD_INPUT
    except Exception as exc:  # noqa: BLE001 - our bug or a broken storage: still one line
        _fail(args, name, f"internal error: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
        return EXIT_FAILED


def _check_sweep_file(words: list[str]) -> None:
    """A new sweep's one word is its sweep file: not an action without its folder, a misspelled
    action, or a sweep folder (each says what was meant)."""
    from gui_app.core.config_json import did_you_mean
    from gui_app.engine.sweep.folder import STUDY_FILE

    if len(words) != 1:
        raise ConfigError(f"expected SWEEP.json or one of {', '.join(ACTIONS)} and a sweep folder; "
                          f"got {' '.join(words)[:80]!r}{did_you_mean(words[0], ACTIONS)}")
    path = Path(words[0])
    if words[0] in ACTIONS and not path.exists():
        raise ConfigError(f"{words[0]}: needs the sweep folder: replica-studio sweep {words[0]} SWEEP_DIR")
    if (path / STUDY_FILE).is_file():
        raise ConfigError(f"{path} is a sweep folder, not a sweep file: replica-studio sweep "
                          f"{'|'.join(ACTIONS)} {path}")


def _fail(args: argparse.Namespace, name: str, message: str) -> None:
    if args.debug:
        traceback.print_exc()
    print(f"replica-studio {name}: {message}", file=sys.stderr, flush=True)


def _with_parallel(sweep: SweepConfig, parallel: int | None) -> SweepConfig:
    return dataclasses.replace(sweep, parallel=parallel) if parallel is not None else sweep


def _open_study(sweep: SweepConfig, storage: str, study_name: str, create: bool):
    from gui_app.engine.sweep import study

    study.check_storage(storage)  # (a journal file: one line that says what is wrong with its path)
    try:
        return study.load(sweep, storage, study_name, create=create)
    except Exception as exc:  # noqa: BLE001 - SQLAlchemy and its drivers raise many types for a bad URL
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ConfigError(f"--storage: cannot open {storage.split('@')[-1]}: {first[:200]}") from None


def _start(args: argparse.Namespace, path: Path) -> int:
    from gui_app.core.rundir import default_sweeps_dir
    from gui_app.engine.sweep.folder import SweepFolder

    sweep = _with_parallel(SweepConfig.load(path), args.parallel)
    _check_place(sweep, args.storage)
    sweeps_dir = Path(args.sweeps_dir) if args.sweeps_dir else default_sweeps_dir()
    if sweeps_dir.exists() and not sweeps_dir.is_dir():
        raise ConfigError(f"--sweeps-dir: {sweeps_dir} is a file, not a folder")
    try:
        folder = SweepFolder.create(sweeps_dir, path.stem, sweep, args.storage)
    except OSError as exc:
        raise ConfigError(f"--sweeps-dir: cannot create a sweep folder in {sweeps_dir}: "
                          f"{exc.strerror or exc}") from None
    info = folder.study()
    try:
        study = _open_study(sweep, info["storage"], info["study_name"], create=True)
    except ConfigError:
        shutil.rmtree(folder.path, ignore_errors=True)
        raise
    _say(str(folder.path))
    if args.detach:  # the study exists; the sweep's own process opens it again (no connection crosses a fork)
        return _detach(folder, lambda: _continue(args, folder))
    return _drive(folder, sweep, study)


def _resume(args: argparse.Namespace, folder) -> int:
    if args.detach:
        if folder.runner_pid() is not None:
            folder.lock()  # refused, with the line that names the process
        _say(str(folder.path))
        return _detach(folder, lambda: _continue(args, folder))
    return _continue(args, folder)


def _check_place(sweep: SweepConfig, storage: str | None) -> None:
    """Before anything is made: a Slurm sweep's commands, and a journal file's path."""
    if sweep.slurm is not None:
        from gui_app.engine.sweep.slurm_trials import check_commands

        check_commands()
    if storage is not None:
        from gui_app.engine.sweep.study import check_storage

        check_storage(storage)


def _continue(args: argparse.Namespace, folder) -> int:
    sweep = _with_parallel(folder.sweep(), args.parallel)
    _check_place(sweep, None)
    info = folder.study()
    study = _open_study(sweep, args.storage or info["storage"], info["study_name"], create=False)
    return _drive(folder, sweep, study)


def action_of(args: argparse.Namespace) -> str | None:
    words = args.words
    return words[0] if len(words) == 2 and words[0] in ACTIONS else None


def _detach(folder, drive: Callable[[], int]) -> int:
    """Run ``drive`` in a forked process of its own session (engine/run/process.py), its stdout
    and stderr appended to ``SWEEP_DIR/sweep.log``; return once it holds the sweep's folder (its
    lock), or with its code and its error line when it ended before."""
    from gui_app.engine.run.process import fork_session

    def run_the_sweep() -> int:
        try:
            return drive()
        except ConfigError as exc:
            print(str(exc), file=sys.stderr, flush=True)
            return EXIT_BAD_INPUT

    log = folder.path / SWEEP_LOG
    pid = fork_session(run_the_sweep, log=log)
    while folder.runner_pid() != pid:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            code = os.waitstatus_to_exitcode(status)
            if code == EXIT_OK:  # it ran to its end already (nothing was left to run)
                return EXIT_OK
            lines = log.read_text(encoding="utf-8", errors="replace").splitlines() if log.is_file() else []
            raise _Ended(code, lines[-1] if lines else f"the sweep's process ended before it started (exit {code}); "
                                                       f"{log} says why")
        time.sleep(0.05)
    return EXIT_OK


class _Ended(ConfigError):
    """A detached sweep's process ended before it held its folder: its code and its error line."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code if code > 0 else EXIT_FAILED


def _drive(folder, sweep: SweepConfig, study) -> int:
    from gui_app.engine.sweep.driver import SweepDriver
    from gui_app.engine.sweep.status import best, trial_rows

    ended = SweepDriver(folder, sweep, study, _say).run()
    rows = trial_rows(folder, study, sweep.metric)
    counts = {state: sum(r.state == state for r in rows) for state in ("completed", "pruned", "failed", "stopped")}
    line = f"sweep {ended}: {len(rows)} trials (" + ", ".join(f"{n} {s}" for s, n in counts.items()) + ")"
    top = best(rows, sweep.direction)
    if top is not None:
        line += f"; best trial {top.number}: {sweep.metric} {top.metric:.4f} ({top.run_dir})"
    _say(line)
    if ended == "stopped":
        _say(f"replica-studio sweep resume {folder.path}  # continues it")
    return EXIT_OK


def _status(args: argparse.Namespace, folder) -> int:
    from gui_app.engine.sweep.status import as_json, as_text, importance, trial_rows

    sweep = folder.sweep()
    info = folder.study()
    study = _open_study(sweep, args.storage or info["storage"], info["study_name"], create=False)
    while True:
        rows = trial_rows(folder, study, sweep.metric)
        if not args.json:
            _say(as_text(rows, sweep.metric, sweep.direction))
            return EXIT_OK
        status = as_json(folder, rows, sweep.metric, sweep.direction, importance(study))
        try:
            print(json.dumps(status), flush=True)
        except (OSError, ValueError):  # the reader went away: nothing follows any more
            return EXIT_OK
        if args.every is None or not (status["running"] or any(r.state == "running" for r in rows)):
            return EXIT_OK
        time.sleep(args.every)


def _stop(args: argparse.Namespace, folder) -> int:
    """Ask the sweep's process to stop its trials; with none running, stop the trials directly.
    Returns once they have all stopped, each with a checkpoint."""
    from gui_app.engine.sweep import trial_process
    from gui_app.engine.sweep.folder import TrialRecord
    from gui_app.engine.sweep.slurm_trials import cancel_active

    folder.ask_stop()
    runner = folder.runner_pid()
    trials: dict[int, tuple[str | None, TrialRecord]] = {}
    if runner is not None:
        _say(f"asked the sweep (process {runner}) to stop its trials")
    else:
        trials = {n: (r.run_dir or folder.run_dir_of(n), r) for n, r in folder.records().items()}
        for line in cancel_active([record for _, record in trials.values() if record.job]):  # scancel: a checkpoint
            _say(line)
    asked = {n for n, (_, record) in trials.items() if record.job is not None}  # (Slurm's jobs: cancelled)
    deadline = time.monotonic() + STOP_WAIT_S
    while True:
        for number, (run_dir, record) in list(trials.items()):  # a trial still starting is asked once it has
            run_dir = run_dir or folder.run_dir_of(number)
            trials[number] = (run_dir, record)
            if number not in asked and run_dir is not None:
                if trial_process.live_pid(run_dir, record) is not None:
                    trial_process.stop(run_dir, record)
                asked.add(number)
        busy = _busy(folder, list(trials.values()))
        if not busy or time.monotonic() >= deadline:
            break
        time.sleep(0.2)
    if busy:
        raise ConfigError(f"sweep_dir: still stopping after {STOP_WAIT_S:.0f} s: {busy}")
    _say(f"stopped; replica-studio sweep resume {folder.path}  # continues it")
    return EXIT_OK


def _busy(folder, trials: list) -> str | None:
    """What still runs: the sweep's process, or a trial's."""
    if folder.runner_pid() is not None:
        return f"the sweep's process {folder.runner_pid()}"
    from gui_app.engine.sweep.slurm_trials import running_jobs
    from gui_app.engine.sweep.trial_process import live_pid

    jobs = running_jobs([record for _, record in trials if record.job])
    if jobs:
        return f"Slurm job {jobs[0]}"
    return next((str(run_dir or record.pid) for run_dir, record in trials
                 if record.job is None and live_pid(run_dir, record)), None)
