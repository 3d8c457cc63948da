"""Multi-worker figures: start-up of a local cluster and steps/s of 1 vs N workers at the same
global batch (MultiWorkerMirroredStrategy, one CPU replica per worker), interleaved A B A B.

    PYTHONPATH=. python benchmarks/bench_cluster.py --repeats 3 --epochs 5 --model mnist_cnn
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from gui_app.core.events import RunStarted, Step, decode
from gui_app.identity import app_command, app_env


def one_run(workers: int, args, folder: Path) -> dict:
    config = {"dataset": {"name": "digits"}, "model": {"name": args.model},
              "strategy": {"name": "multi_worker_mirrored", "workers": workers},
              "training": {"epochs": args.epochs, "global_batch_size": args.batch, "seed": 1, "steps_per_call": 10}}
    return {"workers": workers, **run_config(config, folder, f"w{workers}")}


def run_config(config: dict, folder: Path, name: str, env: dict | None = None) -> dict:
    """Train ``config`` (steps_per_call 10) once: the launch-relative times and steady steps/s."""
    path = folder / f"{name}.json"
    path.write_text(json.dumps(config))
    t0 = time.time()
    done = subprocess.run(app_command("train", str(path), "--runs-dir", str(folder / "runs"), "--events", "jsonl"),
                          capture_output=True, text=True, env=env or app_env({"TF_CPP_MIN_LOG_LEVEL": "2"}),
                          timeout=900)
    wall = time.time() - t0
    events = [decode(json.loads(line)) for line in done.stdout.splitlines()]
    steps = [e for e in events if isinstance(e, Step)]
    started = next(e for e in events if isinstance(e, RunStarted))
    # Steady state: from the end of the first step group to the last step (tracing excluded).
    first, last = steps[9], steps[-1]
    return {"wall_s": wall, "run_started_s": started.time - t0, "first_step_s": steps[0].time - t0,
            "steps_per_s": (last.step - first.step) / (last.time - first.time), "status": events[-1].status}


def with_and_without(repeats: int) -> tuple[argparse.Namespace, dict]:
    """The options of a with/without benchmark over a local 2-worker cluster on digits, and its config."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=repeats)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--model", default="mnist_cnn")
    args = parser.parse_args()
    config = {"dataset": {"name": "digits"}, "model": {"name": args.model},
              "strategy": {"name": "multi_worker_mirrored", "workers": 2},
              "training": {"epochs": args.epochs, "global_batch_size": args.batch, "seed": 1, "steps_per_call": 10}}
    return args, config


def print_medians(speeds: dict[str, list[float]], repeats: int) -> None:
    """The medians of examples/s ``with`` and ``without``, and how much slower ``with`` is."""
    on, off = statistics.median(speeds["with"]), statistics.median(speeds["without"])
    print(json.dumps({"median_with": round(on, 1), "median_without": round(off, 1),
                      "slower_percent": round(100 * (1 - on / off), 2), "repeats": repeats}))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--model", default="mnist_cnn")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args()
    results = {w: [] for w in args.workers}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.repeats):
            for w in args.workers:
                r = one_run(w, args, Path(tmp))
                print(json.dumps(r), flush=True)
                results[w].append(r)
    for w, rs in results.items():
        med = {k: statistics.median(r[k] for r in rs)
               for k in ("wall_s", "run_started_s", "first_step_s", "steps_per_s")}
        print(f"workers={w}: median " + ", ".join(f"{k} {v:.2f}" for k, v in med.items()))


if __name__ == "__main__":
    main()
