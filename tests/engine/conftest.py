"""Fixtures of the engine tests."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from logical_devices import configure_test_runtime

from gui_app.core.config import RunConfig


@pytest.fixture(scope="session", autouse=True)
def _two_logical_cpus():
    """The in-process engine tests run TensorFlow here: two logical CPUs first."""
    configure_test_runtime()


@pytest.fixture
def write_config(tmp_path):
    """Write a config (dict or RunConfig) into tmp_path and return its path."""
    def write(data: dict | RunConfig, name: str = "config.json") -> Path:
        path = tmp_path / name
        text = data.to_json() if isinstance(data, RunConfig) else json.dumps(data)
        path.write_text(text)
        return path

    return write
