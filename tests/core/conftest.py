"""The core tests run TensorFlow in this process: two logical CPUs first (tests/conftest.py)."""
from __future__ import annotations

import pytest
from logical_devices import configure_test_runtime


@pytest.fixture(scope="session", autouse=True)
def _two_logical_cpus():
    configure_test_runtime()
