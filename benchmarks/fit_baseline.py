"""The baseline the engine is measured against: a plain Keras ``fit`` script.

    python benchmarks/fit_baseline.py CONFIG.json [--out DIR] [--steps-per-execution N]

It reads the same run config as ``replica-studio train`` and trains the same model (built by
the same ``build_model``, with the same standardisation layer) on the same ``.npz`` data with
the same optimizer, global batch and epochs, under the same strategy (``mirrored``: the listed
devices, ``one_device``: no strategy, as Keras users write it). Then, like the engine, it
evaluates the test set and saves the model. It prints one JSON line: per-epoch seconds and
the examples trained, so the caller can compute steady-state examples/s (epochs after the
first; epoch end to epoch end) besides the whole-process wall time it measures itself.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("config")
    parser.add_argument("--out", help="folder for model.keras (default: a temporary folder)")
    parser.add_argument("--steps-per-execution", type=int, default=None,
                        help="default: 1 under mirrored (fit fails with more there), 10 on one device")
    parser.add_argument("--no-evaluate", action="store_true")
    args = parser.parse_args()

    from gui_app.core.config import RunConfig
    from gui_app.engine.training.devices import configure_runtime

    cfg = RunConfig.load(args.config)
    configure_runtime(cfg.runtime)
    import keras
    import tensorflow as tf

    from gui_app.engine.datasets.arrays import read_npz
    from gui_app.engine.training.models import build_model, channel_stats

    arrays = read_npz(Path(cfg.dataset.path))
    x, y = arrays["x_train"], arrays["y_train"]
    if x.ndim == 3:
        x = x[..., None]
    x_test, y_test = arrays["x_test"], arrays["y_test"]
    if x_test.ndim == 3:
        x_test = x_test[..., None]
    if cfg.strategy.name == "mirrored":
        strategy = tf.distribute.MirroredStrategy(list(cfg.strategy.devices),
                                                  cross_device_ops=tf.distribute.ReductionToOneDevice())
        spe = args.steps_per_execution or 1
    else:
        strategy = tf.distribute.get_strategy()
        spe = args.steps_per_execution or 10
    batch, epochs = cfg.training.global_batch_size, cfg.training.epochs
    keras.utils.set_random_seed(cfg.training.seed or 1)
    with strategy.scope():
        model = build_model(cfg.model, x.shape[1:], 10, channel_stats=channel_stats(x))
        model.compile(keras.optimizers.Adam(cfg.training.learning_rate),
                      keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      metrics=["accuracy"], steps_per_execution=spe)
    n = len(x) // batch * batch  # the engine drops the last partial batch too
    xs = x[:n].astype("float32") / 255.0
    ys = y[:n]

    class EpochTimes(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.seconds, self.ends = [], []

        def on_epoch_begin(self, epoch, logs=None):
            self._t = time.perf_counter()

        def on_epoch_end(self, epoch, logs=None):
            self.seconds.append(time.perf_counter() - self._t)
            self.ends.append(time.perf_counter())

    times = EpochTimes()
    model.fit(xs, ys, batch_size=batch, epochs=epochs, verbose=0, shuffle=True, callbacks=[times])
    if not args.no_evaluate:
        model.evaluate(x_test.astype("float32") / 255.0, y_test, batch_size=batch, verbose=0)
    with tempfile.TemporaryDirectory() as tmp:
        model.save(Path(args.out or tmp) / "model.keras")
    # Steady state: epoch end to epoch end, as the engine's epoch_end events give it.
    print(json.dumps({"epoch_seconds": times.seconds, "epoch_ends": times.ends, "examples_per_epoch": n}),
          flush=True)


if __name__ == "__main__":
    main()
