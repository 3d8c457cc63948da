"""The engine against Keras ``fit``: same model, data, global batch, epochs and strategy.

    python benchmarks/bench_engine.py [--quick] [--pairs 3] [--workloads mnist,cifar]
        [--strategies mirrored,one_device] [--engine-root DIR] [--json OUT]

For each workload (synthetic MNIST-shaped 54,000 x 28x28x1 with mnist_cnn, CIFAR-shaped
45,000 x 32x32x3 with cifar_cnn; ``--quick``: 12,800 and 6,400 examples) and strategy
(``mirrored`` over two logical CPUs against ``fit`` under the same MirroredStrategy;
``one_device`` against ``fit(steps_per_execution=10)`` with no strategy), it runs pairs of
whole processes, engine then fit, interleaved: ``replica-studio train CONFIG --events none``
(per-replica statistics, TensorBoard, checkpoints, the final save and test evaluation
included) and ``benchmarks/fit_baseline.py CONFIG`` (fit, evaluate, save). Batch 128,
2 epochs, validation off. Two figures per configuration, each the median over pairs of the
ratio fit time / engine time (= engine examples/s / fit examples/s; > 1: the engine is faster):
*whole process* (launch to exit) and *steady state* (the second epoch, epoch end to epoch end).
``--engine-root`` measures another checkout's engine (e.g. ``git archive main``) for a
before/after. Targets (issue 11): mirrored >= 1.25, one device >= 1.0.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common
import workloads

TARGETS = {"mirrored": 1.25, "one_device": 1.0}
QUICK_EXAMPLES = {"mnist": 12_800, "cifar": 6_400}


def _engine_steady(run_dir: Path) -> float:
    from gui_app.core.events import EpochEnd
    from gui_app.core.rundir import read_raw_events

    ends = [e.time for e in read_raw_events(run_dir) if isinstance(e, EpochEnd)]
    return ends[-1] - ends[-2]


def measure(kind: str, strategy: str, pairs: int, tmp: Path, quick: bool, engine_root: Path | None,
            epochs: int = 2) -> list[dict]:
    npz = workloads.make_npz(kind, tmp, QUICK_EXAMPLES[kind] if quick else None)
    config = workloads.write_config(workloads.run_config(kind, npz, strategy, epochs=epochs),
                                    tmp / f"{kind}-{strategy}.json")
    whole, steady = [], []
    for i in range(pairs):
        runs = tmp / f"runs-{kind}-{strategy}-{i}"
        engine_s, _ = common.timed([common.PYTHON, "-m", "gui_app.engine", "train", str(config), "--events", "none",
                                    "--runs-dir", str(runs)], common.env(engine_root))
        engine_steady = _engine_steady(next(runs.iterdir()))
        fit_s, out = common.timed([common.PYTHON, str(common.ROOT / "benchmarks" / "fit_baseline.py"), str(config)],
                                  common.env())
        ends = json.loads(out.strip().splitlines()[-1])["epoch_ends"]
        fit_steady = ends[-1] - ends[-2]
        whole.append(fit_s / engine_s)
        steady.append(fit_steady / engine_steady)
        print(f"    {kind} {strategy} pair {i + 1}: engine {engine_s:.1f} s (steady epoch {engine_steady:.2f} s), "
              f"fit {fit_s:.1f} s (steady epoch {fit_steady:.2f} s)", file=sys.stderr, flush=True)
    against = "fit mirrored" if strategy == "mirrored" else "fit(steps_per_execution=10)"
    cmd = f"python benchmarks/bench_engine.py{' --quick' if quick else ''} --workloads {kind} --strategies {strategy}"
    return [common.figure(f"engine/{against} speed, {kind}, {strategy}, whole process", whole,
                          TARGETS[strategy], command=cmd),
            common.figure(f"engine/{against} speed, {kind}, {strategy}, steady state", steady,
                          TARGETS[strategy], command=cmd)]


def run(quick: bool = False, pairs: int | None = None, kinds=("mnist", "cifar"), strategies=("mirrored", "one_device"),
        engine_root: Path | None = None) -> list[dict]:
    pairs = pairs or (2 if quick else 3)
    figures = []
    with tempfile.TemporaryDirectory(prefix="bench-engine-") as tmp:
        for kind in kinds:
            for strategy in strategies:
                figures += measure(kind, strategy, pairs, Path(tmp), quick, engine_root)
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--pairs", type=int)
    parser.add_argument("--workloads", default="mnist,cifar")
    parser.add_argument("--strategies", default="mirrored,one_device")
    parser.add_argument("--engine-root", type=Path, help="the checkout whose gui_app runs the engine")
    parser.add_argument("--json")
    args = parser.parse_args()
    figures = run(args.quick, args.pairs, args.workloads.split(","), args.strategies.split(","), args.engine_root)
    common.show(figures)
    return common.finish(figures, args.json)


if __name__ == "__main__":
    sys.exit(main())
