"""Every benchmark, one command: figures beside their targets, JSON, and a non-zero exit
when a target is missed.

    python benchmarks/run.py [--quick] [--only engine,eval,charts,window,startup] [--json OUT]

Sections (each also runs alone: ``python benchmarks/bench_<name>.py``):
  engine   engine vs Keras fit, MNIST- and CIFAR-shaped, mirrored and one device (bench_engine.py)
  eval     distributed evaluation vs model.evaluate (bench_eval.py)
  charts   one chart redraw at 1k / 100k / 1M points (bench_charts.py)
  window   the window's cost, event-loop latency and memory during a digits run (bench_window.py)
  startup  launch to first painted window (empty, 1,000 runs warm and cold) and to the first finished
           step from the window and the CLI (bench_startup.py)
Ratios come from interleaved whole-process runs (medians over pairs, spread beside them);
the machine this runs on may be shared, so read the spread too. ``--quick`` takes smaller
data and fewer pairs (minutes instead of about an hour); docs/benchmarks.md holds the figures
of a full run. Offscreen Qt unless $QT_QPA_PLATFORM says otherwise.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import common

SECTIONS = ("engine", "eval", "charts", "window", "startup")


def section(name: str, quick: bool) -> list[dict]:
    if name == "engine":
        import bench_engine
        return bench_engine.run(quick)
    if name == "eval":
        import bench_eval
        return bench_eval.run(quick)
    if name == "charts":
        # In a child process: Qt and the chart widgets stay out of this one.
        import json
        import tempfile
        with tempfile.NamedTemporaryFile(suffix=".json") as out:
            common.timed([common.PYTHON, str(common.ROOT / "benchmarks" / "bench_charts.py"),
                          *(["--quick"] if quick else []), "--json", out.name], common.env(), timeout=900)
            return json.loads(Path(out.name).read_text())["figures"]
    if name == "window":
        import bench_window
        return bench_window.run(quick)
    if name == "startup":
        import bench_startup
        return bench_startup.run(3 if quick else 5)
    raise SystemExit(f"run.py: unknown section {name!r}; choose from {', '.join(SECTIONS)}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller data, fewer pairs")
    parser.add_argument("--only", default=",".join(SECTIONS), help="comma-separated sections")
    parser.add_argument("--json", help="write every figure here")
    args = parser.parse_args()
    figures: list[dict] = []
    for name in args.only.split(","):
        started = time.perf_counter()
        print(f"{name}:", flush=True)
        found = section(name, args.quick)
        for f in found:
            f["section"] = name
        common.show(found)
        print(f"  ({time.perf_counter() - started:.0f} s)", flush=True)
        figures += found
    missed = [f["name"] for f in figures if not common.passed(f)]
    print(f"{len(figures)} figures, {len(missed)} targets missed" + (": " + "; ".join(missed) if missed else ""))
    return common.finish(figures, args.json)


if __name__ == "__main__":
    sys.exit(main())
