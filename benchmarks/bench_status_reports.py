"""The cost of the stall watch on a healthy run: examples/s of a local 2-worker cluster with the
workers' status reports (engine/cluster/status_reports.py: a UDP datagram every 0.5 s, the phase
read from the training thread's stack) and without them (REPLICA_STUDIO_STATUS_REPORTS=0),
interleaved A B A B on the same config; medians. Each replica's arrival at the all-reduce
(``ready_time``) is one more column of the per-step statistics either way.

    PYTHONPATH=. python benchmarks/bench_status_reports.py --repeats 5 --epochs 4 --model mnist_cnn
"""
from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_cluster import print_medians, run_config, with_and_without

from gui_app.identity import app_env


def main() -> None:
    args, config = with_and_without(repeats=5)
    speeds: dict[str, list[float]] = {"with": [], "without": []}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.repeats):
            for name, on in (("with", "1"), ("without", "0")) if i % 2 == 0 else (("without", "0"), ("with", "1")):
                env = app_env({"TF_CPP_MIN_LOG_LEVEL": "2", "REPLICA_STUDIO_STATUS_REPORTS": on})
                r = run_config(config, Path(tmp), f"{name}{i}", env)
                assert r["status"] == "completed", r
                speeds[name].append(r["steps_per_s"] * args.batch)
                print(json.dumps({"reports": name, "examples_per_s": round(speeds[name][-1], 1)}), flush=True)
    print_medians(speeds, args.repeats)


if __name__ == "__main__":
    main()
