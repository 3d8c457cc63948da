"""Process-wide test setup.

The window never runs TensorFlow, and neither does this process while the UI tests run:
:func:`pytest_collection_modifyitems` runs tests/ui and the top-level tests first, and only
then tests/core and tests/engine, whose conftest files split the CPU into two logical devices
(TensorFlow fixes them when its runtime starts) before their first test. So
tests/ui/test_no_tensorflow.py can check that nothing in the window imported TensorFlow.
"""
from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pytest

# Every test runs as a new user would: HOME is a fresh folder and the XDG folders default under
# it, so no test reads the developer's settings or writes into their home (the Scaling and
# Prepare dialogs offer folders in ~, the runs folder defaults to ~/.local/share). The engine
# processes the tests start inherit it.
_HOME = Path(tempfile.mkdtemp(prefix="replica-studio-test-home-"))
atexit.register(shutil.rmtree, _HOME, True)
os.environ["HOME"] = str(_HOME)
for _name in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME", "REPLICA_STUDIO_RUNS_DIR",
              "REPLICA_STUDIO_CONFIG_DIR", "REPLICA_STUDIO_SWEEPS_DIR"):
    os.environ.pop(_name, None)

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("PYQTGRAPH_QT_LIB", "PySide6")

# Shared fixtures of their own modules: ssh_host (a real SSH host, tests/ssh_host.py).
pytest_plugins = ("ssh_host",)

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
