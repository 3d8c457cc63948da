"""Process-wide test setup.

The window never runs TensorFlow, and neither does this process while the UI tests run:
:func:`pytest_collection_modifyitems` runs tests/ui and the top-level tests first, and only
then tests/core and tests/engine, whose conftest files split the CPU into two logical devices
(TensorFlow fixes them when its runtime starts) before their first test. So
tests/ui/test_no_tensorflow.py can check that nothing in the window imported TensorFlow.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("PYQTGRAPH_QT_LIB", "PySide6")

_TESTS = Path(__file__).resolve().parent
_TENSORFLOW_DIRS = (_TESTS / "core", _TESTS / "engine")


def pytest_collection_modifyitems(session, config, items):
    """TensorFlow-free tests (tests/ui, tests/test_*.py) first, then those that import it."""
    def uses_tensorflow(item) -> bool:
        path = Path(str(item.fspath)).resolve()
        return any(folder in path.parents for folder in _TENSORFLOW_DIRS)

    items.sort(key=uses_tensorflow)  # stable: the order within each group is kept


@pytest.fixture(scope="session")
def trained_run(tmp_path_factory) -> Path:
    """A digits run trained once per session by the real engine under MirroredStrategy over
    two CPU replicas (tests/reference_run.py); the export, CLI and GUI tests share it."""
    from reference_run import build_run

    return build_run(tmp_path_factory.getbasetemp() / "export-runs")
