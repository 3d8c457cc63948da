"""Sweep search methods on digits: TPE with median pruning against a grid and random search, at
the same budget of trials, and the wall time of a sweep with 1 vs 2 trials at once.

    PYTHONPATH=. python benchmarks/bench_sweep.py [--trials 16] [--epochs 10] [--seeds 3] [--json OUT]
        [--methods grid,random,tpe]

Each sweep is ``replica-studio sweep`` as a user runs it (its trials real engine processes); the
figures come from ``sweep status --json``: the best validation accuracy, and the trial-epochs
spent (epochs run, summed over trials: what pruning saves). TPE and random search are medians
over ``--seeds`` sweeps with different sampler seeds; the grid is one sweep (its values do not
depend on the seed). The grid is 4 learning rates x 4 batch sizes = 16 trials.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from gui_app.identity import app_command, app_env

BASE = {"dataset": {"name": "digits"}, "model": {"name": "mlp"}, "strategy": {"name": "default"},
        "training": {"epochs": 10, "optimizer": "adam", "seed": 1}}
PARAMETERS = {"training.learning_rate": {"log_uniform": [1e-5, 1e-1]},
              "training.global_batch_size": {"choice": [16, 32, 64, 128]}}


def sweep(folder: Path, name: str, keys: dict, args) -> dict:
    spec = {"base": {**BASE, "training": {**BASE["training"], "epochs": args.epochs}}, "parameters": PARAMETERS,
            "trials": args.trials, **keys}
    path = folder / f"{name}.json"
    path.write_text(json.dumps(spec))
    env = app_env({"TF_CPP_MIN_LOG_LEVEL": "2"})
    started = time.perf_counter()
    done = subprocess.run(app_command("sweep", str(path), "--sweeps-dir", str(folder / "sweeps")),
                          capture_output=True, text=True, env=env, timeout=7200)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"sweep {name} failed: {done.stderr[-2000:]}")
    sweep_dir = done.stdout.splitlines()[0]
    status = json.loads(subprocess.run(app_command("sweep", "status", sweep_dir, "--json"), capture_output=True,
                                       text=True, env=env, check=True).stdout)
    trials = status["trials"]
    return {"name": name, "wall_s": wall, "best": status["best"]["metric"] if status["best"] else None,
            "trial_epochs": sum(t["epochs"] for t in trials),
            "pruned": sum(t["state"] == "pruned" for t in trials), "trials": len(trials)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=16)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--methods", default="grid,random,tpe", help="which to run (comma-separated)")
    args = parser.parse_args()
    results: dict[str, list[dict]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-sweep-") as tmp:
        folder = Path(tmp)
        methods = args.methods.split(",")
        if "grid" in methods:
            results["grid, 1 at a time"] = [sweep(folder, "grid-p1", {"method": "grid", "grid_points": 4,
                                                                      "parallel": 1}, args)]
            results["grid"] = [sweep(folder, "grid-p2", {"method": "grid", "grid_points": 4, "parallel": 2}, args)]
        for seed in range(args.seeds):
            if "random" in methods:
                results.setdefault("random", []).append(
                    sweep(folder, f"random-{seed}", {"method": "random", "seed": seed, "parallel": 2}, args))
            if "tpe" in methods:
                results.setdefault("tpe + median pruning", []).append(sweep(folder, f"tpe-{seed}", {
                    "method": "tpe", "pruner": "median", "seed": seed, "parallel": 2}, args))  # the pruner's defaults
    print(f"{'method':<22} {'best val_accuracy':>18} {'trial-epochs':>13} {'pruned':>7} {'wall s':>8}  (medians)")
    for method, runs in results.items():
        med = {key: statistics.median(r[key] for r in runs) for key in ("best", "trial_epochs", "pruned", "wall_s")}
        print(f"{method:<22} {med['best']:>18.4f} {med['trial_epochs']:>13.0f} {med['pruned']:>7.0f} "
              f"{med['wall_s']:>8.0f}  {[round(r['best'], 4) for r in runs]}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
