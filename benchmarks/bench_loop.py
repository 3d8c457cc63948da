"""Training throughput of the engine's loop against Keras ``fit``, measured in one run.

    python benchmarks/bench_loop.py [--examples 60000] [--epochs 2]

Trains the mnist_cnn on synthetic MNIST-shaped data (no download) four ways and prints
samples/s and the ratio to the ``fit`` baseline measured in the same process:

1. ``model.fit`` with no strategy (the baseline of docs/architecture.md, "Throughput on the test machine"),
2. ``model.fit`` under MirroredStrategy over two logical CPUs,
3. our loop, one step per ``tf.function`` call, same strategy,
4. our loop, ten steps per call (the default).

Each configuration runs in a fresh process: measured in one process, whatever ran earlier
(other strategies' threads and caches) slowed later configurations by up to 40 %. The first
epoch (tracing) is excluded from every figure. Not part of the test suite.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--examples", type=int, default=60000)
    parser.add_argument("--epochs", type=int, default=2, help="timed epochs (after one warm-up epoch)")
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--only", type=int, help=argparse.SUPPRESS)  # one configuration, in this process
    args = parser.parse_args()
    if args.only is None:
        return compare(args)

    from gui_app.core.config import DatasetConfig, ModelConfig, RuntimeConfig, TrainingConfig
    from gui_app.engine.training.devices import configure_runtime

    configure_runtime(RuntimeConfig(cpu_devices=2))
    import keras
    import numpy as np
    import tensorflow as tf

    from gui_app.engine.datasets.base import make_dataset
    from gui_app.engine.training.in_memory import InMemoryInput
    from gui_app.engine.training.loop import Trainer
    from gui_app.engine.training.models import build_model
    from gui_app.engine.training.optim import build_optimizer, make_schedule

    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (args.examples, 28, 28, 1), dtype=np.uint8)
    y = rng.integers(0, 10, args.examples).astype(np.int64)
    steps = args.examples // args.batch
    n = steps * args.batch

    def fit(strategy) -> float:
        with strategy.scope():
            model = build_model(ModelConfig(), (28, 28, 1), 10)
            model.compile(keras.optimizers.Adam(1e-3), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        xs = x[:n].astype("float32") / 255.0
        model.fit(xs, y[:n], batch_size=args.batch, epochs=1, verbose=0)
        t = time.perf_counter()
        model.fit(xs, y[:n], batch_size=args.batch, epochs=args.epochs, verbose=0, shuffle=True)
        return args.epochs * n / (time.perf_counter() - t)

    def loop(strategy, per_call: int) -> float:
        cfg = TrainingConfig(global_batch_size=args.batch, steps_per_call=per_call)
        with strategy.scope():
            model = build_model(ModelConfig(), (28, 28, 1), 10)
            optimizer = build_optimizer(cfg, make_schedule(cfg, steps, steps * (args.epochs + 1)))
        trainer = Trainer(strategy, model, optimizer, args.batch)

        source = InMemoryInput(make_dataset("synthetic", "bench", x, y, x[:1], y[:1]), DatasetConfig(validation="none"),
                               args.batch)

        def epoch(index: int) -> None:
            it = iter(source.train(strategy, index, 0, seed=1))
            done = 0
            while done < steps:
                k = min(per_call, steps - done)
                trainer.train(it, k)
                done += k

        epoch(0)
        t = time.perf_counter()
        for e in range(args.epochs):
            epoch(e + 1)
        return args.epochs * n / (time.perf_counter() - t)

    def mirrored():
        return tf.distribute.MirroredStrategy(["CPU:0", "CPU:1"], cross_device_ops=tf.distribute.ReductionToOneDevice())

    runs = [lambda: fit(tf.distribute.get_strategy()), lambda: fit(mirrored()),
            lambda: loop(mirrored(), 1), lambda: loop(mirrored(), 10)]
    print(runs[args.only]())


CONFIGURATIONS = ("fit, no strategy (baseline)", "fit, mirrored 2 CPUs",
                  "our loop, 1 step/call, mirrored 2 CPUs", "our loop, 10 steps/call, mirrored 2 CPUs")


def compare(args) -> None:
    base = None
    print(f"{'configuration':45s} {'samples/s':>10s} {'ratio':>6s}")
    for i, name in enumerate(CONFIGURATIONS):
        out = subprocess.run([sys.executable, __file__, "--only", str(i), "--examples", str(args.examples),
                              "--epochs", str(args.epochs), "--batch", str(args.batch)],
                             capture_output=True, text=True, check=True)
        rate = float(out.stdout.strip().splitlines()[-1])
        base = base or rate
        print(f"{name:45s} {rate:10.0f} {rate / base:6.2f}", flush=True)


if __name__ == "__main__":
    main()
