"""The reference run configuration, and a finished run directory made from it by the real engine.

``replica-studio train`` on the bundled digits with ``mnist_cnn`` under
``MirroredStrategy(["CPU:0", "CPU:1"])`` (two logical CPUs, so two replicas; docs/architecture.md,
"TensorFlow and Keras facts"), so the exports are tested on exactly what the app leaves behind: model.keras
(with its input-standardising Normalization layer), config.json, eval.json, events.jsonl.

The engine runs as its own process, as the app runs it. The ``trained_run`` session fixture
of tests/conftest.py calls :func:`build_run`.
"""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

from gui_app.identity import app_command, app_env

# The reference configuration: digits, mnist_cnn, mirrored over two CPU replicas.
REFERENCE = {
    "dataset": {"name": "digits"},
    "model": {"name": "mnist_cnn"},
    "strategy": {"name": "mirrored", "devices": ["CPU:0", "CPU:1"]},
    "training": {"epochs": 5, "global_batch_size": 64, "optimizer": "adam", "learning_rate": 0.001, "seed": 1},
    "runtime": {"cpu_devices": 2},
}
# The trained run the export, CLI and GUI tests share (their figures were measured with this rate).
CONFIG = {**REFERENCE, "training": {**REFERENCE["training"], "learning_rate": 0.003}}


def build_run(runs_dir: Path) -> Path:
    """The completed run under ``runs_dir``, trained now unless an earlier module already did."""
    found = sorted(runs_dir.glob("*/model.keras"))
    if not found:
        runs_dir.mkdir(parents=True, exist_ok=True)
        config = runs_dir / "digits-mirrored.json"
        config.write_text(json.dumps(CONFIG))
        done = subprocess.run(app_command("train", str(config), "--runs-dir", str(runs_dir), "--events", "none"),
                              env=app_env({"TF_CPP_MIN_LOG_LEVEL": "2"}), capture_output=True, text=True,
                              timeout=600)
        found = sorted(runs_dir.glob("*/model.keras"))
        if done.returncode != 0 or not found:
            raise RuntimeError(f"the engine could not train the export test run (exit {done.returncode}):\n"
                               f"{done.stderr[-3000:]}")
    return found[0].parent


def write_test_pngs(run_dir: Path, folder: Path, count: int = 2, scale: int = 1):
    """The run's first ``count`` test images as PNG files, each pixel repeated ``scale`` times
    in both directions (so that reading them back must resize). Returns (paths, images, labels)."""
    import numpy as np
    import tensorflow as tf

    from gui_app.core.config import RunConfig
    from gui_app.engine.datasets import load_dataset

    data = load_dataset(RunConfig.load(run_dir / "config.json").dataset)
    paths = []
    for i in range(count):
        image = np.repeat(np.repeat(data.x_test[i], scale, 0), scale, 1)
        paths.append(folder / f"digit{i}.png")
        paths[-1].write_bytes(tf.io.encode_png(image).numpy())
    return paths, data.x_test[:count], data.y_test[:count]

