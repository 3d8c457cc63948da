"""``replica-studio scaling CONFIG``: time a short burst of training for each strategy and
replica count, and report the speed-up (core/scaling.py has the figures and the chart).

    replica-studio scaling config.json [--max-replicas 2] [--strategies one_device,mirrored]
                           [--steps 60] [--warmup 20] [--eval] [--options] [--output DIR] [--json]

Each burst is a real ``train`` process of the same dataset, model and global batch (a process
per configuration: TensorFlow fixes the device topology once per process), stopped through its
control channel once ``warmup + steps`` steps are done; the warm-up (tracing, the first step
groups) is not timed. ``--eval`` also evaluates each stopped run. The report goes to
DIR/scaling.json and DIR/scaling.svg; the table to stdout, progress to stderr (with --json,
stdout carries JSON lines only: ``progress`` events -- gui_app.core.events.Progress, ``stage``
"scaling", ``done`` of ``total`` bursts, ``fraction``, ``message`` -- and the ``scaling_report``).
``--options`` also times communication options of the multi-replica configuration
(core/scaling_options.py): each with its examples/s and its effect on the training loss.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gui_app.core import scaling, scaling_options
from gui_app.core.config import ConfigError, RunConfig
from gui_app.core.events import Eval, Event, Progress, RunFinished, RunStarted, Step, decode_line, encode
from gui_app.core.run_lock import holder
from gui_app.core.rundir import LOG_FILE
from gui_app.engine.run import process as run_process
from gui_app.engine.run.exits import EXIT_BAD_INPUT, EXIT_OK
from gui_app.engine.run.process import last_line
from gui_app.identity import app_command, app_env

BURST_TIMEOUT_S = 600
POLL_S = 0.02  # how often a burst's events are read (as attach does): its stop is asked after the step group
# that reached the burst's steps, so a fast model (the digits MLP: ~10 ms a group) may train a group
# more; the figures take the burst's own steps only (core/scaling.burst_figures)


COMMANDS = ("scaling",)


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("scaling",
                              help="time each strategy and replica count on this config; report the speed-up")
    p.add_argument("config", help="run configuration file (JSON): its dataset, model and global batch are used")
    p.add_argument("--max-replicas", type=int, default=2, metavar="N", help="replicas (and local workers) up to N")
    p.add_argument("--strategies", default=",".join(scaling.DEFAULT_STRATEGIES),
                   help=f"comma-separated, from {', '.join(scaling.STRATEGIES)} (default: "
                        f"{','.join(scaling.DEFAULT_STRATEGIES)}, as the window)")
    p.add_argument("--steps", type=int, default=60, help="timed steps per burst (default 60)")
    p.add_argument("--warmup", type=int, default=20, help="untimed steps first (default 20)")
    p.add_argument("--eval", action="store_true", help="also time distributed evaluation")
    p.add_argument("--options", action="store_true",
                   help="also time communication options (float16 all-reduce, pack size, ring, gradient "
                        "accumulation) of mirrored / multi_worker_mirrored on N replicas, with their loss effect")
    p.add_argument("--output", "-o", metavar="DIR", help="where scaling.json and scaling.svg go (default: .)")
    p.add_argument("--json", action="store_true", help="stdout carries JSON lines only")
    p.add_argument("--debug", action="store_true")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    say = _Say(args.json)
    try:
        config = RunConfig.load(args.config)
        strategies = tuple(s.strip() for s in args.strategies.split(",") if s.strip())
        if args.max_replicas < 1 or args.steps < 1 or args.warmup < 1:
            raise ConfigError("--max-replicas, --steps and --warmup: must be at least 1")
        scaling.candidates(config.to_dict(), args.max_replicas, strategies)  # names checked before TensorFlow starts
        if args.options and not scaling_options.option_candidates(config.to_dict(), args.max_replicas, strategies):
            raise ConfigError("--options: needs mirrored or multi_worker_mirrored in --strategies and "
                              "--max-replicas of at least 2")
        gpus = _gpu_count()
        plan = scaling.candidates(config.to_dict(), args.max_replicas, strategies, gpus)
        if args.options:
            plan += scaling_options.option_candidates(config.to_dict(), args.max_replicas, strategies, gpus)
    except (ConfigError, ValueError, OSError) as exc:
        print(f"replica-studio scaling: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    out_dir = Path(args.output or ".")
    bursts = []
    with tempfile.TemporaryDirectory(prefix="replica-studio-scaling-") as work:
        for i, candidate in enumerate(plan):
            say.progress(i, len(plan), f"{candidate.label}: training {args.warmup} + {args.steps} steps")
            bursts.append(_burst(config, candidate, Path(work), args))
    data = scaling_options.report(bursts, on_gpus=gpus > 0)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "scaling.json").write_text(scaling.to_json(data), encoding="utf-8")
    (out_dir / "scaling.svg").write_text(scaling_options.to_svg(data), encoding="utf-8")
    say.progress(len(plan), len(plan), f"report written to {out_dir / 'scaling.json'}")
    if args.json:
        print(json.dumps({"type": "scaling_report", "path": str(out_dir / "scaling.json"), **data}), flush=True)
    else:
        _print_table(data)
    return EXIT_OK


class _Say:
    def __init__(self, as_json: bool) -> None:
        self.as_json = as_json

    def progress(self, done: int, total: int, message: str) -> None:
        fraction = done / total if total else 1.0
        if self.as_json:
            print(json.dumps(encode(Progress(time=time.time(), stage="scaling", what="bursts", done=done, total=total,
                                             fraction=fraction, message=message))), flush=True)
        else:
            print(f"[{fraction:4.0%}] {message}", file=sys.stderr, flush=True)


def _gpu_count() -> int:
    """Asked of an engine process: importing TensorFlow here would hold the GPUs the bursts need."""
    done = subprocess.run(app_command("devices", "--json"), capture_output=True, text=True, timeout=300, env=app_env())
    if done.returncode != 0:
        raise OSError(f"cannot detect devices: {(done.stderr.strip().splitlines() or ['no message'])[-1]}")
    return len(json.loads(done.stdout).get("gpus") or [])


def _burst(config: RunConfig, candidate: scaling.Candidate, work: Path, args) -> scaling.Burst:
    burst = scaling.Burst(candidate)
    plain = config.to_dict()
    plain["strategy"], plain["runtime"] = candidate.strategy, candidate.runtime
    plain["training"] = {**plain["training"], **candidate.training}
    try:
        burst_config = RunConfig.from_dict(plain)
    except ConfigError as exc:
        burst.error = str(exc)
        return burst
    path = work / f"{len(list(work.glob('*.json')))}.json"
    burst_config.save(path)
    runs = work / "runs"
    events, error = _train_until(path, runs, args.warmup + args.steps)
    try:
        figures = scaling.burst_figures(events, args.warmup, args.warmup + args.steps)
    except ValueError as exc:
        burst.error = error or str(exc)
        return burst
    burst.examples_per_sec, burst.steps = figures["examples_per_sec"], figures["steps"]
    burst.devices = figures["devices"]
    burst.compute_s, burst.input_s, burst.other_s = figures["compute_s"], figures["input_s"], figures["other_s"]
    burst.loss = figures["loss"]
    run_dir = next((e.run_dir for e in events if isinstance(e, RunStarted)), None)
    if args.eval and run_dir:
        burst.eval_examples_per_sec = _eval_speed(Path(run_dir))
    return burst


def _train_until(config: Path, runs: Path, steps: int) -> tuple[list[Event], str | None]:
    """Run ``train`` detached (engine/run/process.py) and stop it through its control channel
    after ``steps`` steps; its events and, if it failed, why."""
    started = run_process.start(["train", str(config), "--runs-dir", str(runs)], out=runs.parent / "train.out",
                                log=runs.parent / "train.log")
    deadline = time.monotonic() + BURST_TIMEOUT_S
    try:
        run_dir = started.wait(timeout=BURST_TIMEOUT_S)
    except run_process.StartFailed as exc:
        return [], str(exc).removeprefix("replica-studio train: ")
    except subprocess.TimeoutExpired:
        started.process.kill()
        return [], f"train did not start within {BURST_TIMEOUT_S} s"
    follower = run_process.follow(run_dir)
    events: list[Event] = []
    stopped = False
    try:
        while True:
            gone = holder(run_dir) is None  # before reading: all it wrote before it went is read below
            for line in follower.read():
                event = decode_line(line)
                if event is None:
                    continue
                events.append(event)
                if not stopped and isinstance(event, Step) and event.step >= steps:
                    run_process.stop(run_dir)
                    stopped = True
            if follower.finished or gone:
                break
            if time.monotonic() >= deadline:
                _kill(run_dir)
                break
            time.sleep(POLL_S)
    finally:
        follower.close()
    ends = time.monotonic() + 60  # its process ends after its last event: let it before its folder goes
    while holder(run_dir) is not None and time.monotonic() < ends:
        time.sleep(POLL_S)
    finished = next((e for e in reversed(events) if isinstance(e, RunFinished)), None)
    if finished is None:
        return events, last_line(run_dir / LOG_FILE) or "train ended without finishing its run"
    return events, finished.message if finished.status == "failed" else None


def _kill(run_dir: Path) -> None:
    """End a run that outlived the burst's time (it never reached its steps)."""
    pid = holder(run_dir)
    if pid:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def _eval_speed(run_dir: Path) -> float | None:
    done = subprocess.run(app_command("evaluate", str(run_dir), "--events", "jsonl"), capture_output=True, text=True,
                          timeout=BURST_TIMEOUT_S, env=app_env())
    evaluation = next((e for e in map(decode_line, done.stdout.splitlines()) if isinstance(e, Eval)), None)
    speed = evaluation.examples_per_sec if evaluation is not None else None  # the engine times its evaluation
    return float(speed) if speed else None


def _print_table(data: dict) -> None:
    print(f"{'configuration':40s} {'examples/s':>11s} {'speed-up':>9s} {'efficiency':>10s}  time split")
    for row in data["rows"]:
        if row["error"]:
            print(f"{row['label']:40s} failed: {row['error']}")
            continue
        split = row["time_split"] or {}
        text = ", ".join(f"{k} {v:.0%}" for k, v in split.items() if v)
        speed = f"{row['speedup']:.2f}x" if row["speedup"] else "-"
        eff = f"{row['efficiency']:.0%}" if row["efficiency"] else "-"
        print(f"{row['label']:40s} {row['examples_per_sec']:11,.0f} {speed:>9s} {eff:>10s}  {text}")
    if data.get("options"):
        print(f"\n{'communication option':60s} {'examples/s':>11s} {'vs base':>8s} {'loss':>8s} {'Δ loss':>9s}")
        for row in data["options"]:
            if row["error"]:
                print(f"{row['label']:60s} failed: {row['error']}")
                continue
            speed = f"{row['speed_vs_baseline']:.2f}x" if row["speed_vs_baseline"] else "-"
            loss = f"{row['loss']:.4f}" if row["loss"] is not None else "-"
            delta = (f"{row['loss_vs_baseline']:+.5f}" if row["loss_vs_baseline"] is not None
                     else ("n/c" if not row["loss_comparable"] else "-"))
            print(f"{row['label']:60s} {row['examples_per_sec']:11,.0f} {speed:>8s} {loss:>8s} {delta:>9s}")
    if data.get("baseline"):
        print(f"speed-up against {data['baseline']}")
    print(data["recommendation"])
