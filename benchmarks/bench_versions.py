"""Two checkouts' engines on the same config, interleaved: the before/after of an engine change.

    git archive main | tar -x -C /tmp/before
    python benchmarks/bench_versions.py CONFIG.json /tmp/before . [--rounds 3]

Runs ``python -m gui_app.engine train CONFIG --events none`` from each root in turn (old,
new, old, new, ...), each in a fresh process, and prints per run: wall time, launch to the
first step event, the last epoch (epoch end to epoch end), the last epoch end to
``run_finished`` (final save and test evaluation) and ``run_finished`` to the process's exit;
then the median over rounds of old wall / new wall (> 1: the new engine is faster). Configs
from ``benchmarks/workloads.py`` (``run_config``) keep validation off. Not part of run.py: it
compares code, not targets.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common

sys.path.insert(0, str(common.ROOT))

from gui_app.core.events import EpochEnd, RunFinished, Step
from gui_app.core.rundir import read_raw_events


def one_run(config: str, root: Path) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-versions-") as runs:
        started = time.time()
        common.timed([common.PYTHON, "-m", "gui_app.engine", "train", config, "--events", "none", "--runs-dir", runs],
                     common.env(root))
        ended = time.time()
        events = list(read_raw_events(next(Path(runs).iterdir())))  # any protocol version decodes
    ends = [e.time for e in events if isinstance(e, EpochEnd)]
    first = next(e.time for e in events if isinstance(e, Step))
    finished = next(e.time for e in events if isinstance(e, RunFinished))
    return {"wall": ended - started, "first_step": first - started,
            "last_epoch": ends[-1] - ends[-2] if len(ends) > 1 else float("nan"),
            "to_finished": finished - ends[-1], "to_exit": ended - finished}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config")
    parser.add_argument("old", type=Path)
    parser.add_argument("new", type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    ratios = []
    for _ in range(args.rounds):
        row = {}
        for name, root in (("old", args.old), ("new", args.new)):
            row[name] = r = one_run(args.config, root.resolve())
            print(f"{name} {str(root):24} wall {r['wall']:6.2f} s  first step {r['first_step']:5.2f}  last epoch "
                  f"{r['last_epoch']:5.2f}  last epoch end -> finished {r['to_finished']:5.2f}  "
                  f"finished -> exit {r['to_exit']:5.2f}", flush=True)
        ratios.append(row["old"]["wall"] / row["new"]["wall"])
    print(f"old/new wall, median of {args.rounds} rounds: {statistics.median(ratios):.2f} "
          f"(pairs: {', '.join(f'{r:.2f}' for r in ratios)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
