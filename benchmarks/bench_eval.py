"""The engine's distributed evaluation against Keras ``model.evaluate``, same strategy.

    python benchmarks/bench_eval.py [--quick] [--pairs 3] [--examples 10000] [--json OUT]

Each side runs in its own process (interleaved: engine, evaluate, engine, ...): the same
mnist_cnn (built by ``build_model``, untrained: speed does not depend on the weights) under
MirroredStrategy over two logical CPUs evaluates the same synthetic MNIST-shaped test set at
batch 128, once to trace, then ``--repeats`` more times, timed. The engine's side is what a
run does at each epoch end: the in-memory input's set + ``Evaluator.evaluate`` (loss sum,
correct count and confusion matrix reduced with SUM, per-replica example counts gathered);
``evaluate`` computes loss and accuracy. Figure: median over pairs of evaluate's time / the
engine's (> 1: the engine is faster); the first (tracing) call is reported beside it. Target
(issue 11): >= 1.0.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common


def child(side: str, examples: int, repeats: int) -> None:
    sys.path.insert(0, str(common.ROOT))
    from gui_app.core.config import ModelConfig, RuntimeConfig
    from gui_app.engine.training.devices import configure_runtime

    configure_runtime(RuntimeConfig(cpu_devices=2))
    import keras
    import numpy as np
    import tensorflow as tf

    from gui_app.core.config import DatasetConfig
    from gui_app.engine.datasets.base import make_dataset
    from gui_app.engine.training.evaluation import Evaluator
    from gui_app.engine.training.in_memory import InMemoryInput
    from gui_app.engine.training.models import build_model, channel_stats

    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (examples, 28, 28, 1), dtype=np.uint8)
    y = rng.integers(0, 10, examples).astype(np.int64)
    strategy = tf.distribute.MirroredStrategy(["CPU:0", "CPU:1"], cross_device_ops=tf.distribute.ReductionToOneDevice())
    with strategy.scope():
        model = build_model(ModelConfig(), (28, 28, 1), 10, channel_stats=channel_stats(x))
        if side == "keras":
            model.compile(loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    if side == "engine":
        evaluator = Evaluator(strategy, model, 10)
        source = InMemoryInput(make_dataset("synthetic", "bench", x, y, x, y), DatasetConfig(validation="none"), 128)
        once = lambda: evaluator.evaluate(source.test(strategy))  # noqa: E731
    else:
        xs = x.astype("float32") / 255.0
        once = lambda: model.evaluate(xs, y, batch_size=128, verbose=0)  # noqa: E731
    t = time.perf_counter()
    once()
    first = time.perf_counter() - t
    t = time.perf_counter()
    for _ in range(repeats):
        once()
    print(json.dumps({"first": first, "each": (time.perf_counter() - t) / repeats}))


def run(quick: bool = False, pairs: int | None = None, examples: int = 10_000,
        repeats: int | None = None) -> list[dict]:
    pairs = pairs or (2 if quick else 3)
    repeats = repeats or (3 if quick else 5)
    ratio, first = [], []
    for i in range(pairs):
        out = {}
        for side in ("engine", "keras"):
            _, stdout = common.timed([common.PYTHON, __file__, "--child", side, "--examples", str(examples),
                                      "--repeats", str(repeats)], common.env())
            out[side] = json.loads(stdout.strip().splitlines()[-1])
        ratio.append(out["keras"]["each"] / out["engine"]["each"])
        first.append(out["keras"]["first"] / out["engine"]["first"])
        print(f"    eval pair {i + 1}: engine {out['engine']['each']:.3f} s (first {out['engine']['first']:.2f}), "
              f"evaluate {out['keras']['each']:.3f} s (first {out['keras']['first']:.2f})", file=sys.stderr, flush=True)
    cmd = f"python benchmarks/bench_eval.py{' --quick' if quick else ''}"
    return [common.figure(f"engine eval/evaluate speed, mnist {examples}, mirrored, warm", ratio, 1.0, command=cmd),
            common.figure(f"engine eval/evaluate speed, mnist {examples}, mirrored, first call", first, None,
                          command=cmd)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--pairs", type=int)
    parser.add_argument("--examples", type=int, default=10_000)
    parser.add_argument("--repeats", type=int)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--json")
    args = parser.parse_args()
    if args.child:
        child(args.child, args.examples, args.repeats)
        return 0
    figures = run(args.quick, args.pairs, args.examples, args.repeats)
    common.show(figures)
    return common.finish(figures, args.json)


if __name__ == "__main__":
    sys.exit(main())
