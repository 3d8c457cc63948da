"""The cost of the stall watch on a healthy run: examples/s of a local 2-worker cluster with the
workers' status reports (engine/cluster/status_reports.py: a UDP datagram every 0.5 s, the phase
read from the training thread's stack) and without them (REPLICA_STUDIO_STATUS_REPORTS=0),
interleaved A B A B on the same config; medians. Each replica's arrival at the all-reduce
(``ready_time``) is one more column of the per-step statistics either way.

    PYTHONPATH=. python benchmarks/bench_status_reports.py --repeats 5 --epochs 4 --model mnist_cnn
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_cluster import run_config

from gui_app.identity import app_env


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--model", default="mnist_cnn")
    args = parser.parse_args()
    config = {"dataset": {"name": "digits"}, "model": {"name": args.model},
              "strategy": {"name": "multi_worker_mirrored", "workers": 2},
              "training": {"epochs": args.epochs, "global_batch_size": args.batch, "seed": 1, "steps_per_call": 10}}
    speeds: dict[str, list[float]] = {"with": [], "without": []}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.repeats):
            for name, on in (("with", "1"), ("without", "0")) if i % 2 == 0 else (("without", "0"), ("with", "1")):
                env = app_env({"TF_CPP_MIN_LOG_LEVEL": "2", "REPLICA_STUDIO_STATUS_REPORTS": on})
                r = run_config(config, Path(tmp), f"{name}{i}", env)
                assert r["status"] == "completed", r
                speeds[name].append(r["steps_per_s"] * args.batch)
                print(json.dumps({"reports": name, "examples_per_s": round(speeds[name][-1], 1)}), flush=True)
    on, off = statistics.median(speeds["with"]), statistics.median(speeds["without"])
    print(json.dumps({"median_with": round(on, 1), "median_without": round(off, 1),
                      "slower_percent": round(100 * (1 - on / off), 2), "repeats": args.repeats}))


if __name__ == "__main__":
    main()
