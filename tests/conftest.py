"""Process-wide test setup.

TensorFlow fixes its logical devices when its runtime starts, and the in-process tests need
two CPU replicas (MirroredStrategy over CPU:0 and CPU:1, as TensorFlow's and Keras's own
tests do). So the split happens here, before any test can touch TensorFlow; every in-process
run config therefore uses ``runtime.cpu_devices: 2``.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("PYQTGRAPH_QT_LIB", "PySide6")

TEST_CPU_DEVICES = 2


def pytest_configure(config):
    # Importing TensorFlow costs ~3 s once; every TF test needs it anyway.
    from gui_app.core.config import RuntimeConfig
    from gui_app.core.training.devices import configure_runtime

    configure_runtime(RuntimeConfig(cpu_devices=TEST_CPU_DEVICES))


@pytest.fixture(scope="session")
def trained_run(tmp_path_factory) -> Path:
    """A digits run trained once per session by the real engine under MirroredStrategy over
    two CPU replicas (tests/reference_run.py); the export, CLI and GUI tests share it."""
    from reference_run import build_run

    return build_run(tmp_path_factory.getbasetemp() / "export-runs")


@pytest.fixture(autouse=True)
def _collect_garbage_between_tests():
    """Free each test's cyclic garbage (strategies, models, tf.functions made on the main
    thread) at its end, while no worker thread runs TensorFlow. Left to chance, one collection
    ran on the main thread inside a later test while a TaskThread converted a TFLite model, and
    the process aborted (CI run on 2026-11-30; TF 2.21, PySide6 6.11; not reproduced since)."""
    yield
    import gc

    gc.collect()
