"""The workloads the benchmarks share: synthetic MNIST- and CIFAR-shaped datasets written as
``.npz`` files (no download), and the run configuration that trains on them.

The same file and the same config feed ``replica-studio train`` and the plain Keras ``fit``
script (``fit_baseline.py``), so both train the same model on the same data with the same
global batch, epochs and strategy.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

# name -> (image shape, model, training examples, test examples)
SHAPES = {
    "mnist": ((28, 28, 1), "mnist_cnn", 54_000, 2_000),
    "cifar": ((32, 32, 3), "cifar_cnn", 45_000, 2_000),
}


def make_npz(kind: str, folder: Path, train: int | None = None) -> Path:
    """Write (once) a seeded random uint8 dataset of the given shape; returns its path."""
    shape, _, default_train, test = SHAPES[kind]
    train = train or default_train
    path = Path(folder) / f"synthetic-{kind}-{train}.npz"
    if path.exists():
        return path
    rng = np.random.default_rng(0)
    arrays = {
        "x_train": rng.integers(0, 256, (train, *shape), dtype=np.uint8),
        "y_train": rng.integers(0, 10, train).astype(np.int64),
        "x_test": rng.integers(0, 256, (test, *shape), dtype=np.uint8),
        "y_test": rng.integers(0, 10, test).astype(np.int64),
    }
    tmp = path.with_suffix(".tmp.npz")
    np.savez(tmp, **arrays)
    tmp.replace(path)
    return path


def run_config(kind: str, npz: Path, strategy: str, epochs: int = 2, batch: int = 128,
               steps_per_call: int = 10) -> dict:
    """A run config for ``replica-studio train``: validation off, so the run is all training."""
    _, model, _, _ = SHAPES[kind]
    if strategy == "mirrored":
        strat = {"name": "mirrored", "devices": ["CPU:0", "CPU:1"]}
        runtime = {"cpu_devices": 2}
    elif strategy == "one_device":
        strat, runtime = {"name": "one_device", "device": "CPU:0"}, {"cpu_devices": 1}
    else:
        raise ValueError(strategy)
    return {
        "dataset": {"name": "npz", "path": str(npz), "validation": "none"},
        "model": {"name": model},
        "strategy": strat,
        "training": {"epochs": epochs, "global_batch_size": batch, "seed": 1,
                     "steps_per_call": steps_per_call},
        "runtime": runtime,
    }


def write_config(config: dict, path: Path) -> Path:
    Path(path).write_text(json.dumps(config, indent=1), encoding="utf-8")
    return Path(path)
