"""The cost of the stall watch in a cluster a scheduler runs, where the chief hosts it
(gui_app/engine/cluster/chief_watch.py): examples/s of a 2-worker cluster started as a scheduler
starts it -- two ``replica-studio worker CONFIG --cluster tf_config`` processes, each with its own
TF_CONFIG on loopback, no launcher -- with the watch (the chief's board, its watch thread and
every worker's reports) and without it (REPLICA_STUDIO_STATUS_REPORTS=0), interleaved A B B A on
the same config; medians of the steady examples/s (the first step group, which traces, left out).

    PYTHONPATH=. python benchmarks/bench_chief_watch.py --repeats 6 --epochs 4 --model mnist_cnn
"""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_cluster import print_medians, with_and_without

from gui_app.core.cluster_addresses import free_ports, tf_config
from gui_app.identity import app_command, app_env


def one_run(config: Path, folder: Path, name: str, reports: bool, batch: int) -> float:
    """One run's steady examples/s, from the chief's step events."""
    ports = free_ports(2)
    cluster = {"worker": [f"127.0.0.1:{p}" for p in ports]}
    procs = []
    for i in range(2):
        env = app_env({"TF_CPP_MIN_LOG_LEVEL": "2", "REPLICA_STUDIO_STATUS_REPORTS": "1" if reports else "0",
                       "TF_CONFIG": tf_config(cluster, "worker", i)})
        cmd = app_command("worker", str(config), "--cluster", "tf_config", "--data-seed", "1", "--events",
                          "jsonl" if i == 0 else "none")
        if i == 0:
            cmd += ["--run-dir", str(folder / name)]
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE if i == 0 else subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL, text=True))
    out, _ = procs[0].communicate(timeout=900)
    procs[1].wait(timeout=120)
    events = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert events and events[-1].get("status") == "completed", events[-1:]
    steps = [e for e in events if e["type"] == "step"]
    first, last = steps[9], steps[-1]  # steady state: after the first group of 10
    return (last["step"] - first["step"]) / (last["time"] - first["time"]) * batch


def main() -> None:
    args, config = with_and_without(repeats=6)
    speeds: dict[str, list[float]] = {"with": [], "without": []}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "run.json"
        path.write_text(json.dumps(config))
        for i in range(args.repeats):
            for name in ("with", "without") if i % 2 == 0 else ("without", "with"):
                speeds[name].append(one_run(path, Path(tmp), f"{name}{i}", name == "with", args.batch))
                print(json.dumps({"watch": name, "examples_per_s": round(speeds[name][-1], 1)}), flush=True)
    print_medians(speeds, args.repeats)


if __name__ == "__main__":
    main()
