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


_LOOPBACK_PREFIXES = ("127.", "::1", "0:0:0:0:0:0:0:1", "localhost")


def _is_loopback(address) -> bool:
    if isinstance(address, (str, bytes)):  # AF_UNIX path
        return True
    host = address[0] if isinstance(address, tuple) and address else ""
    host = host.decode() if isinstance(host, bytes) else str(host)
    return host == "" or host.startswith(_LOOPBACK_PREFIXES) or host.startswith("::ffff:127.")


@pytest.fixture(autouse=True)
def _no_network(monkeypatch):
    """Tests never leave the machine: connecting anywhere but loopback or a Unix socket fails at
    once (a test that needs the network is wrong here; multi-worker tests use 127.0.0.1)."""
    import socket

    real_connect, real_connect_ex = socket.socket.connect, socket.socket.connect_ex

    def guard(address):
        if not _is_loopback(address):
            raise OSError(f"network access in a test: connect to {address!r} refused by tests/conftest.py")

    def connect(self, address):
        if self.family in (socket.AF_INET, socket.AF_INET6):
            guard(address)
        return real_connect(self, address)

    def connect_ex(self, address):
        if self.family in (socket.AF_INET, socket.AF_INET6):
            guard(address)
        return real_connect_ex(self, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)
    monkeypatch.setattr(socket, "getaddrinfo", _guarded_getaddrinfo(socket.getaddrinfo))
    yield


def _guarded_getaddrinfo(real):
    def getaddrinfo(host, *args, **kwargs):
        name = host.decode() if isinstance(host, bytes) else host
        if name not in (None, "", "localhost") and not str(name).startswith(_LOOPBACK_PREFIXES):
            raise OSError(f"network access in a test: name lookup of {name!r} refused by tests/conftest.py")
        return real(host, *args, **kwargs)

    return getaddrinfo
