"""Synthetic long runs from a real short run's events: its step lines repeated, steps renumbered,
to N steps x R replicas, in protocol 2's long line form ("old") or protocol 3's lean one ("new").

    python benchmarks/long_runs.py SOURCE_RUN OUT_RUNS_DIR --steps 300000 --replicas 8 --form old [--name NAME]
    python benchmarks/long_runs.py --make-source DIR     # a real short run to start from (digits, 2 CPU replicas)

The run folder it writes opens like any other: ``config.json`` and ``eval.json`` (and the
misclassified examples) copied from the source, and ``events.jsonl``: the source's
``run_started`` (R replicas, each on its own ``CPU:r``, N total steps), then N ``step`` events,
step i taking the figures of the source's step (i-1) mod S and each replica r those of the
source's replica r mod R0, ``--epochs`` epochs (100: a long run's epochs are long; one per
source epoch's 20 steps would be 15,000 epochs, which no real run of 300,000 steps has), each
ending with an ``epoch_end`` and a ``checkpoint``, then its ``eval`` and a ``run_finished``.
Times go up by the source's median step time. The old form writes each figure with a double's
digits, as protocol 2's engine did (``float(float32)``: TensorFlow's values); the new form what
this version's engine writes.

Each step line is formatted once per source step with placeholders and then only has its step,
epoch and time put in: 300,000 x 8 (773 MB old, 410 MB new) writes in 3-12 s here.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gui_app.core import rundir
from gui_app.core.event_codec import fields
from gui_app.core.event_lines import LineEncoder
from gui_app.core.events import (
    Checkpoint,
    EpochEnd,
    Eval,
    ReplicaInfo,
    ReplicaStats,
    RunFinished,
    RunStarted,
    Step,
)

FORMS = {"old": "full", "new": "lean"}
DEVICE = "/job:localhost/replica:0/task:0/device:CPU:{}"
COPIED = (rundir.CONFIG_FILE, rundir.EVAL_FILE, rundir.MISCLASSIFIED_FILE)
SOURCE_CONFIG = {"dataset": {"name": "digits"}, "model": {"name": "mnist_cnn"},
                 "strategy": {"name": "mirrored", "devices": ["CPU:0", "CPU:1"]},
                 "training": {"epochs": 3, "global_batch_size": 64, "seed": 1}, "runtime": {"cpu_devices": 2}}
_FLOATS = {cls: [f.name for f in fields(cls) if float in f.as_is and f.name != "time"] for cls in (Step, ReplicaStats)}


def make_source(runs_dir: Path) -> Path:
    """A real short run trained now by the engine (``replica-studio train``), the generator's source."""
    runs_dir.mkdir(parents=True, exist_ok=True)
    config = runs_dir / "source.json"
    config.write_text(json.dumps(SOURCE_CONFIG))
    from gui_app.identity import app_command, app_env

    done = subprocess.run(app_command("train", str(config), "--runs-dir", str(runs_dir), "--events", "none"),
                          env=app_env({"TF_CPP_MIN_LOG_LEVEL": "2"}), capture_output=True, text=True, timeout=900)
    found = sorted(runs_dir.glob("*/events.jsonl"))
    if done.returncode != 0 or not found:
        raise SystemExit(f"long_runs: the source run failed ({done.returncode}): {done.stderr[-2000:]}")
    return found[-1].parent


def _double_digits(event):
    """``event`` with its figures as protocol 2 wrote them: a float32 value with a double's digits."""
    for name in _FLOATS[type(event)]:
        value = getattr(event, name)
        if value is not None and math.isfinite(value):
            setattr(event, name, float(np.float32(value)))
    return event


def _templates(steps: list[Step], replicas: int, form: str) -> list[str]:
    """Each source step as the rest of its line after ``"epoch":E,``, with ``replicas`` entries."""
    encoder = LineEncoder(FORMS[form])
    encoder.encode(RunStarted(run_dir="", config={}, replicas=_infos(replicas)))
    out = []
    for source in steps:
        entries = []
        for r in range(replicas):
            entry = dataclasses.replace(source.replicas[r % len(source.replicas)], replica=r, worker=0,
                                        device=DEVICE.format(r))
            entries.append(_double_digits(entry) if form == "old" else entry)
        step = dataclasses.replace(source, step=0, epoch=0, time=0.0, replicas=entries)
        if form == "old":
            _double_digits(step)
        text = json.dumps(encoder.encode(step), separators=(",", ":"))
        head = '{"type":"step","time":0.0,"step":0,"epoch":0,'
        assert text.startswith(head), text[:80]
        out.append(text[len(head):])
    return out


def _infos(replicas: int) -> list[ReplicaInfo]:
    return [ReplicaInfo(replica=r, worker=0, device=DEVICE.format(r)) for r in range(replicas)]


def _line(encoder: LineEncoder, event) -> str:
    return json.dumps(encoder.encode(event), separators=(",", ":")) + "\n"


def write_run(source: Path, runs_dir: Path, steps: int, replicas: int, form: str, name: str | None = None,
              epochs: int = 100) -> Path:
    """Write the synthetic run (see the module's docstring); returns its folder."""
    if form not in FORMS:
        raise SystemExit(f"long_runs: --form must be one of {', '.join(FORMS)}")
    events = list(rundir.read_raw_events(source))
    started = next((e for e in events if isinstance(e, RunStarted)), None)
    source_steps = [e for e in events if isinstance(e, Step) and e.replicas]
    if started is None or not source_steps:
        raise SystemExit(f"long_runs: {source} has no run_started or no step events to repeat")
    evaluation = next((e for e in reversed(events) if isinstance(e, Eval)), None)
    per_epoch = max(1, math.ceil(steps / max(1, epochs)))
    times = [b.time - a.time for a, b in zip(source_steps, source_steps[1:]) if b.time > a.time]
    dt = statistics.median(times) if times else 0.1
    run_dir = runs_dir / (name or f"{steps}x{replicas}-{form}")
    if run_dir.exists():
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True)
    for file in COPIED:
        if (source / file).is_file():
            shutil.copy2(source / file, run_dir / file)
    encoder = LineEncoder(FORMS[form])
    t0 = started.time
    header = dataclasses.replace(started, run_dir=str(run_dir), total_steps=steps, steps_per_epoch=per_epoch,
                                 epochs=math.ceil(steps / per_epoch),
                                 num_replicas=replicas, replicas=_infos(replicas), resumed=False, start_step=0,
                                 protocol=2 if form == "old" else started.protocol)
    templates = _templates(source_steps, replicas, form)
    source_epochs = [e for e in events if isinstance(e, EpochEnd)] or [EpochEnd(epoch=1)]
    with open(run_dir / rundir.EVENTS_FILE, "w", encoding="utf-8") as out:
        out.write(_line(encoder, header))
        chunk: list[str] = []
        for i in range(1, steps + 1):
            epoch = (i - 1) // per_epoch + 1
            chunk.append(f'{{"type":"step","time":{t0 + i * dt:.3f},"step":{i},"epoch":{epoch},'
                         f'{templates[(i - 1) % len(templates)]}\n')
            if i % per_epoch == 0 or i == steps:
                end = source_epochs[(epoch - 1) % len(source_epochs)]
                t = round(t0 + i * dt, 3)
                chunk.append(_line(encoder, dataclasses.replace(end, epoch=epoch, step=i, time=t)))
                chunk.append(_line(encoder, Checkpoint(step=i, path=str(run_dir / "checkpoints" / f"ckpt-{epoch}"),
                                                       time=t)))
            if len(chunk) >= 4096:
                out.write("".join(chunk))
                chunk = []
        out.write("".join(chunk))
        t = round(t0 + steps * dt + 1, 3)
        if evaluation is not None:
            out.write(_line(encoder, dataclasses.replace(evaluation, time=t)))
        out.write(_line(encoder, RunFinished(status="completed", run_dir=str(run_dir), step=steps, time=t)))
    return run_dir


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", nargs="?", help="a run folder to repeat (a real short run)")
    parser.add_argument("runs_dir", nargs="?", help="the runs folder to write the synthetic run into")
    parser.add_argument("--steps", type=int, default=300_000)
    parser.add_argument("--replicas", type=int, default=8)
    parser.add_argument("--form", choices=tuple(FORMS), default="new")
    parser.add_argument("--epochs", type=int, default=100, help="epochs the steps are split into")
    parser.add_argument("--name", help="the run folder's name (default STEPSxREPLICAS-FORM)")
    parser.add_argument("--make-source", metavar="DIR", help="train a real short run under DIR and print its folder")
    args = parser.parse_args(argv)
    if args.make_source:
        print(make_source(Path(args.make_source)))
        return 0
    if not args.source or not args.runs_dir:
        parser.error("SOURCE_RUN and OUT_RUNS_DIR are needed (or --make-source DIR)")
    if args.steps < 1 or args.replicas < 1 or args.epochs < 1:
        parser.error("--steps, --replicas and --epochs must be at least 1")
    run_dir = write_run(Path(args.source), Path(args.runs_dir), args.steps, args.replicas, args.form, args.name,
                       args.epochs)
    size = (run_dir / rundir.EVENTS_FILE).stat().st_size
    print(json.dumps({"run_dir": str(run_dir), "bytes": size, "steps": args.steps, "replicas": args.replicas,
                      "form": args.form}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
